"""The proxy's reasoning, free of Temporal: the same code runs in activities and in replay."""
