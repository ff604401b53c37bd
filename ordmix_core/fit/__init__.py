"""One data set's fit around the sweep: restart starts, the race between restarts
(schedule, stopping rule, selection), acceleration and the settling of a stop."""
