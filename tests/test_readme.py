"""The README's Python example runs and says what its comments say."""

import re
from pathlib import Path


def test_readme_example_runs_and_merges_sessions_with_retractions():
    text = (Path(__file__).parent.parent / "README.md").read_text()
    model = text[text.index("## The model in 20 lines") :]
    code = re.search(r"```python\n(.*?)```", model, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    panes = scope["sim"].panes
    assert [("-" if p.is_retraction else "+") + str(p.value) for p in panes] == [
        "+5",
        "+7",
        "-5",
        "-7",
        "+20",
    ]
    assert len(panes[-1].supersedes) == 2
