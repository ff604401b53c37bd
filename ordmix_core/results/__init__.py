"""What a fit gives a manager: decisions (labels, flags, what to rate next), the
label model, the output schema and the output folders."""
