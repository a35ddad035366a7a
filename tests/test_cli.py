import graphloc
from graphloc.cli import main


def test_info_reports_the_kernels(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"graphloc {graphloc.__version__}" in out
    expected = "compiled graphloc._C (CPU" if graphloc.HAS_EXTENSION else "reference ops"
    assert expected in out
