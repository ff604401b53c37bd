"""Each item's label and how sure it is: one label fit (``confusion_model``), one posterior
per item (``choose.choose_labels``, read by ``posterior``), its calibration to a careful
annotator or, with gold, the expert (``calibration``), every threshold in one policy
(``policy``)."""
