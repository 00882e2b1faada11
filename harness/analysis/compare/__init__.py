"""Two runs of one suite side by side: what moved, the environment they ran in, as text and a plot."""
