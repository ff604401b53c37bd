"""One data set's fit around the sweep: its control in six modules. The race between restarts
and its stopping rule (``race``), one step (``step``: the sweep, SQUAREM, the exact eps step),
the rescues of a slow fit (``rescues``, over the blocks ``settle`` solves), a restart's record,
start and the choice among restarts (``restarts``), and every constant of it (``policy``)."""
