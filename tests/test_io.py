"""graphloc.io: what graphloc writes is verified when read back."""

from __future__ import annotations

import pytest
import torch

from graphloc.io import CHECKSUM_KEY, atomic_save, load_file, save_figure, write_json


def _flip_byte_of(path, tensor: torch.Tensor) -> None:
    """Flips one bit inside ``tensor``'s stored bytes (torch.save keeps them verbatim)."""
    raw = bytearray(path.read_bytes())
    payload = tensor.numpy().tobytes()
    at = raw.find(payload)
    assert at >= 0, "the tensor's bytes are not stored verbatim"
    raw[at + len(payload) // 2] ^= 0x04
    path.write_bytes(bytes(raw))


def test_a_flipped_byte_in_a_tensor_is_an_error_naming_the_file(tmp_path):
    weights = torch.arange(1000, dtype=torch.float32)
    path = tmp_path / "best.pt"
    atomic_save({"state_dict": {"w": weights}, "epoch": 3}, str(path))
    assert load_file(str(path), "checkpoint")["state_dict"]["w"].equal(weights)
    _flip_byte_of(path, weights)
    assert not torch.load(path)["state_dict"]["w"].equal(weights)  # torch alone loads it
    with pytest.raises(ValueError, match=r"best.pt: the checksum of this checkpoint does not "
                                         r"match .* restore a copy"):
        load_file(str(path), "checkpoint", rebuild="restore a copy")


def test_saved_files_stay_plain_torch_files(tmp_path):
    atomic_save({"x": torch.ones(2)}, str(tmp_path / "a.pt"))
    loaded = torch.load(tmp_path / "a.pt")
    assert set(loaded) == {"x", CHECKSUM_KEY}
    assert set(load_file(str(tmp_path / "a.pt"), "file")) == {"x"}


def test_a_changed_value_outside_tensors_is_caught(tmp_path):
    path = tmp_path / "c.pt"
    atomic_save({"config": {"layers": 4}, "x": torch.ones(1)}, str(path))
    state = torch.load(path)
    state["config"]["layers"] = 5  # edited by hand and saved without re-stamping
    torch.save(state, path)
    with pytest.raises(ValueError, match="checksum"):
        load_file(str(path), "checkpoint")


def test_not_a_dict_and_missing_keys_name_the_file(tmp_path):
    torch.save([1, 2, 3], tmp_path / "list.pt")
    with pytest.raises(ValueError, match=r"list.pt is not a checkpoint: it holds a list"):
        load_file(str(tmp_path / "list.pt"), "checkpoint", keys=("config",))
    atomic_save({"config": {}}, str(tmp_path / "partial.pt"))
    with pytest.raises(ValueError, match=r"partial.pt is not a complete cache: it lacks x, y\. "
                                         r"Pass force_reload"):
        load_file(str(tmp_path / "partial.pt"), "cache", keys=("config", "x", "y"),
                  rebuild="Pass force_reload=True.")
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="junk.pt is not a readable cache"):
        load_file(str(tmp_path / "junk.pt"), "cache")


def test_json_that_fails_to_serialise_leaves_the_old_file(tmp_path):
    """write_json writes through a temporary file: an object json cannot encode raises
    and leaves the file that was there, whole (a plain open(path, "w") had emptied it)."""
    import json
    path = tmp_path / "metrics.json"
    write_json({"R": 1.5}, str(path))
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json({"R": 2.0, "bad": object()}, str(path))
    assert json.loads(path.read_text()) == {"R": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_json_holds_null_for_non_finite_numbers_and_parses_strictly(tmp_path):
    """An R of seeds without influence (NaN) was written as NaN, which is not JSON: strict
    readers refused the whole file. Non-finite numbers are null now, everywhere in it."""
    import json
    import math
    path = tmp_path / "r.json"
    nan, inf = float("nan"), float("inf")
    write_json({"R": nan, "curve": [1.0, inf, -inf], "nested": {"ci": (nan, 2.5)}, "n": 3,
                "ok": True, "name": "nan"}, str(path))

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    parsed = json.loads(path.read_text(), parse_constant=refuse)
    assert parsed == {"R": None, "curve": [1.0, None, None], "nested": {"ci": [None, 2.5]},
                      "n": 3, "ok": True, "name": "nan"}
    assert not math.isnan(json.loads(path.read_text())["curve"][0])


def test_figures_are_saved_in_the_format_of_their_extension(tmp_path):
    pytest.importorskip("matplotlib")
    from graphloc.plotting import require_matplotlib
    fig = require_matplotlib().figure()
    save_figure(fig, str(tmp_path / "a.png"))
    save_figure(fig, str(tmp_path / "b.pdf"))
    save_figure(fig, str(tmp_path / "c"))  # no extension: PNG
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "b.pdf").read_bytes()[:4] == b"%PDF"
    assert (tmp_path / "c").read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.pdf", "c"]

