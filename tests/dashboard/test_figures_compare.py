"""The Compare page's figures: the grid's title above its subplot titles, never on them."""

from __future__ import annotations

import pandas as pd
import pytest

from ordmix_core.dashboard import figures_compare

TABLE = pd.DataFrame(
    {
        "method": ["mean", "odm"],
        **{m: [0.4, 0.3] for m in figures_compare.METRIC_LABELS},
    }
)
SPAM = pd.DataFrame(
    {"spam_level": [0, 1, 0, 1], "method": ["mean", "mean", "odm", "odm"]}
    | {m: [0.4, 0.5, 0.3, 0.35] for m in ("mse", "correlation", "ndcg")}
)

#: plotly's default font sizes (px): the figure title's, a subplot title's (an annotation's)
TITLE_PX, SUBTITLE_PX, LINE = 17, 16, 1.3


@pytest.mark.parametrize(
    "fig",
    [figures_compare.metric_bars(TABLE), figures_compare.spam_curves(SPAM)],
    ids=["metric_bars", "spam_curves"],
)
def test_the_title_sits_above_the_subplot_titles(fig) -> None:
    """The title hangs from the top of the figure; the top row's subplot titles stand on the
    plots' top edge, in the top margin: the margin holds both, one above the other (with the
    title's padding), so the "MSE" title no longer sits on the figure's."""
    layout = fig.layout
    assert layout.title.yref == "container" and layout.title.y == 1.0
    assert layout.title.yanchor == "top"
    top_row = [a for a in layout.annotations if a.y >= max(x.y for x in layout.annotations)]
    lines = max(a.text.count("<br>") + 1 for a in top_row)
    title_bottom = layout.title.pad.t + TITLE_PX * LINE
    subtitles_top = layout.margin.t - lines * SUBTITLE_PX * LINE
    assert title_bottom < subtitles_top, (title_bottom, subtitles_top)
