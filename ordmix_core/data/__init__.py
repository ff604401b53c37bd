"""Ratings as the fit sees them: the scale, ``CrowdData`` and ``prepare``, queries, ID
coding, simulated crowds and the TREC reader."""
