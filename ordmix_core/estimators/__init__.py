"""The estimators (scikit-learn / crowd-kit style): the base class, the
ordinal mixture, its options, the refit from an earlier fit and the baselines."""
