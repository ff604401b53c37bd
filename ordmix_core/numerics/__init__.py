"""Numerical building blocks: compiled-code switch, libm's elementwise math, the
erfcx table, truncated-normal statistics and keyed random numbers."""
