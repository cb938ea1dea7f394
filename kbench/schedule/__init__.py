"""What schedules a sweep: which pairs, builds and evaluations in worker processes, the workers."""
