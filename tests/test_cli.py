import graphloc
from graphloc.cli import main


def test_info_reports_the_kernels(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"graphloc {graphloc.__version__}" in out
    expected = "compiled graphloc._C (CPU" if graphloc.HAS_EXTENSION else "reference ops"
    assert expected in out


def test_dataset_build_and_stats(tmp_path, capsys):
    import os

    import pytest
    pytest.importorskip("osmium")
    source = os.path.join(os.path.dirname(__file__), "..", "datasets", "samples",
                          "helsinki.osm.pbf")
    assert main(["dataset", "build", source, "--out", str(tmp_path), "--hops", "4"]) == 0
    assert (tmp_path / "helsinki.tar.gz").exists()
    assert "wrote" in capsys.readouterr().out
    assert main(["dataset", "stats", "synthetic:500", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "nodes: 500" in out and "features: 11, classes: 10" in out
