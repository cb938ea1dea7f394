"""Building candidates' extensions: the cache, compile slots, precompiled torch headers."""
