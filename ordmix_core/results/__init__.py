"""What a fit gives a manager as tables: the decision columns (labels, flags, what to rate
next), the annotators' reliability, the output schema and the output folders."""
