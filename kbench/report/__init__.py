"""What reports: tables, summaries, plots, the terminal's progress, KernelBench's verdicts."""
