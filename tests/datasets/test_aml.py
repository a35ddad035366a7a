import csv
import math
import os

import pytest
import torch

from graphloc.datasets import (
    AMLTransactions,
    aml_accounts,
    daily_split,
    synthetic_transactions,
    temporal_split,
)
from graphloc.datasets.aml import ACCOUNT_COLUMNS, COLUMNS

ROWS = [  # a tiny file in the IBM format, not in time order
    ["2022/09/01 00:20", "010", "8000EBD30", "010", "8000EBD30", "3697.34", "US Dollar",
     "3697.34", "US Dollar", "Reinvestment", "0"],
    ["2022/09/01 00:15", "3208", "8000F4580", "001", "8000F5340", "0.01", "US Dollar", "0.01",
     "US Dollar", "Cheque", "0"],
    ["2022/09/02 10:00", "3208", "8000F4580", "001", "8000F5340", "14675.57", "Euro",
     "15000.00", "US Dollar", "ACH", "1"],
    ["2022/09/03 11:00", "001", "8000F5340", "10", "8000EBD30", "99.00", "Euro", "99.00",
     "Euro", "ACH", "0"],
    ["2022/09/03 11:00", "010", "8000EBD30", "3208", "8000F4580", "5.00", "US Dollar", "5.00",
     "US Dollar", "Cash", "1"],
]


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def test_reads_the_ibm_format(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    data = AMLTransactions(str(tmp_path), "Tiny")
    assert data.accounts == ["10:8000EBD30", "1:8000F5340", "3208:8000F4580"]  # "010" is 10
    assert data.num_nodes == 3 and data.num_edges == 5
    assert data.graph.edge_index.tolist() == [[2, 0, 2, 1, 0], [1, 0, 1, 0, 2]]  # time order
    assert data.y.tolist() == [0, 0, 1, 0, 1]
    assert data.edge_time.tolist() == [0.0, 300.0, 121500.0, 211500.0, 211500.0]
    names = data.feature_names
    assert names[:2] == ["log1p amount received", "log1p amount paid"]
    third = dict(zip(names, data.edge_attr[2].tolist(), strict=True))
    assert third["log1p amount received"] == pytest.approx(math.log1p(14675.57))
    assert third["log1p amount paid"] == pytest.approx(math.log1p(15000.0))
    assert third["receiving currency=Euro"] == 1 and third["payment currency=US Dollar"] == 1
    assert third["payment format=ACH"] == 1 and sum(third.values()) == pytest.approx(
        math.log1p(14675.57) + math.log1p(15000.0) + 3)
    assert torch.equal(data.x, torch.ones(3, 1))
    # the two 11:00 edges share a timestamp: they stay in one split
    assert [t.tolist() for t in (data.train_index, data.val_index, data.test_index)] == \
        [[0, 1, 2], [], [3, 4]]
    assert data.split_graph("train").num_edges == 3 and data.split_graph("test").num_edges == 5


def test_generator_round_trip_is_deterministic_with_parallel_edges_and_patterns(tmp_path):
    path = synthetic_transactions(300, 5000, seed=3, root=str(tmp_path / "a"))
    again = synthetic_transactions(300, 5000, seed=3, root=str(tmp_path / "b"))
    assert open(path).read() == open(again).read()
    data = AMLTransactions(str(tmp_path / "a"), "Synthetic")
    assert data.num_edges == 5000 and data.num_nodes <= 300
    assert 0.015 < data.y.float().mean() < 0.05
    group, num_pairs = data.graph.edge_groups()
    sizes = torch.bincount(group)
    assert num_pairs < 0.8 * data.num_edges and sizes.max() >= 5  # many parallel edges
    laundering_pairs = group[data.y == 1].unique()
    assert (sizes[laundering_pairs] >= 2).float().mean() > 0.9  # structured transfers
    assert (data.edge_time.diff() >= 0).all()
    n = data.num_edges
    assert abs(data.train_index.numel() - 0.6 * n) < 0.02 * n
    assert abs(data.val_index.numel() - 0.2 * n) < 0.02 * n


def test_processed_cache_is_used_and_refreshed(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    AMLTransactions(str(tmp_path), "Tiny")
    cache = tmp_path / "processed" / "Tiny.pt"
    first = os.path.getmtime(cache)
    AMLTransactions(str(tmp_path), "Tiny")
    assert os.path.getmtime(cache) == first
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS[:3])
    os.utime(tmp_path / "Tiny_Trans.csv", (first + 10, first + 10))
    assert AMLTransactions(str(tmp_path), "Tiny").num_edges == 3


def test_the_mega_gnn_protocol_is_the_data_of_its_code(tmp_path):
    """What MEGA-GNN's get_data makes of format_kaggle_files' output, worked out by hand
    for ROWS with the first row paid in Yuan: currency codes by first appearance in the
    file, each row's receiving one first, one numbering for both columns (US Dollar 0,
    Yuan 1, Euro 2), payment formats likewise (Reinvestment 0, Cheque 1, ACH 2, Cash 3),
    rows in time order; days 0, 0, 1, 2, 2 hold 2, 1, 2 transactions, and of the splits
    into whole days only train {0}, validation {1}, test {2} keeps every share's error to
    100% (40%, 20%, 40% against 60, 20, 20)."""
    rows = [ROWS[0][:8] + ["Yuan"] + ROWS[0][9:], *ROWS[1:]]
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, rows)
    data = AMLTransactions(str(tmp_path), "Tiny", protocol="mega-gnn")
    assert data.feature_names == ["Timestamp", "Amount Received", "Received Currency",
                                  "Payment Format"]
    expected = [[0, 0.01, 0, 1], [300, 3697.34, 0, 0], [121500, 14675.57, 2, 2],
                [211500, 99.0, 2, 2], [211500, 5.0, 0, 3]]
    torch.testing.assert_close(data.edge_attr, torch.tensor(expected))
    assert torch.equal(data.x, torch.zeros(3, 1))  # all ones, z-normalised
    assert [t.tolist() for t in (data.train_index, data.val_index, data.test_index)] == \
        [[0, 1], [2], [3, 4]]
    graphloc = AMLTransactions(str(tmp_path), "Tiny")  # the same cache, the other protocol
    assert torch.equal(graphloc.graph.edge_index, data.graph.edge_index)
    # each split graph normalised by its own edges: train holds t = 0 and 300
    train = data.normalized_edge_attr("train")
    assert train.shape == (2, 4)
    torch.testing.assert_close(train[:, 0], torch.tensor([-1.0, 1.0]) / math.sqrt(2))
    assert torch.equal(train[:, 2], torch.zeros(2))  # one currency: deviation 0, taken as 1
    test = data.normalized_edge_attr("test")
    column = torch.tensor(expected)[:, 1]
    torch.testing.assert_close(test[:, 1], (column - column.mean()) / column.std())
    with pytest.raises(ValueError, match=r"aml_accounts reads the features of "
                                         r"AMLTransactions\(\.\.\., protocol='graphloc'\)"):
        aml_accounts(data)
    with pytest.raises(ValueError, match=r"split must be 'train', 'val' or 'test', got "
                                         r"'validation'"):
        data.normalized_edge_attr("validation")
    with pytest.raises(ValueError, match=r"protocol must be one of \('graphloc', 'mega-gnn'\), "
                                         r"got 'official'"):
        AMLTransactions(str(tmp_path), "Tiny", protocol="official")


@pytest.mark.parametrize("per_day, expected", [
    ([10] * 10, (60, 20, 20)),  # exact: 6, 2 and 2 days
    ([30, 0, 30, 20, 0, 20], (60, 20, 20)),  # empty days belong to a split as well
    ([5, 40, 15, 5, 20, 25], (60, 25, 25)),  # cut (4, 5), 65/20/25, ties at 13.6%: later
])
def test_daily_split_takes_whole_days_nearest_to_60_20_20(per_day, expected):
    time = torch.cat([torch.full((n,), 86_400.0 * d + 60) for d, n in enumerate(per_day)])
    train, val, test = daily_split(time)
    assert (train.numel(), val.numel(), test.numel()) == expected
    assert torch.equal(torch.cat([train, val, test]), torch.arange(time.numel()))
    with pytest.raises(ValueError, match="the transactions span 1 day; the split needs"):
        daily_split(torch.zeros(5))


def test_temporal_split_keeps_ties_together():
    time = torch.tensor([0., 1, 2, 3, 4, 5, 6, 6, 6, 9])
    train, val, test = temporal_split(time)
    assert train.tolist() == [0, 1, 2, 3, 4, 5] and val.tolist() == [] and \
        test.tolist() == [6, 7, 8, 9]


@pytest.mark.parametrize("change,message", [
    (lambda rows: rows, r"missing column\(s\) \['Is Laundering'\]"),
    (lambda rows: [["2022-09-01 00:20", *rows[0][1:]]], r"line 2: bad timestamp '2022-09-01"),
    (lambda rows: [rows[0][:5] + ["12x", *rows[0][6:]]], r"line 2: bad Amount Received '12x'"),
    (lambda rows: [rows[0][:10] + ["2"]], r"'Is Laundering' must be 0 or 1, got '2'"),
    (lambda rows: [rows[0][:2] + [""] + rows[0][3:]], r"unknown account id ''"),
    (lambda rows: [], r"holds no transactions"),
])
def test_bad_files_give_clear_errors(tmp_path, change, message):
    header = COLUMNS[:-1] if "missing" in message else COLUMNS
    _write(tmp_path / "Bad_Trans.csv", header, change([list(r) for r in ROWS]))
    with pytest.raises(ValueError, match=message):
        AMLTransactions(str(tmp_path), "Bad")
    assert not (tmp_path / "processed" / "Bad.pt").exists()  # nothing half-written


def test_unknown_account_and_missing_file(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    _write(tmp_path / "Tiny_accounts.csv", ACCOUNT_COLUMNS,
           [["Bank 10", "010", "8000EBD30", "E1", "x"], ["Bank 1", "001", "8000F5340", "E2", "y"]])
    with pytest.raises(ValueError, match=r"line 3: unknown account id '8000F4580' of bank '3208'"):
        AMLTransactions(str(tmp_path), "Tiny")
    with pytest.raises(FileNotFoundError, match=r"HI-Small_Trans.csv .*kaggle.com.*put it at"):
        AMLTransactions(str(tmp_path), "HI-Small")
    with pytest.raises(ValueError, match="split must be"):
        synthetic = synthetic_transactions(50, 200, root=str(tmp_path / "s"))
        AMLTransactions(os.path.dirname(synthetic), "Synthetic").split_graph("all")
    with pytest.raises(ValueError, match="num_accounts must be an integer >= 20"):
        synthetic_transactions(5, 200, root=str(tmp_path))


def test_columns_are_read_by_header_name_in_any_order(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    canonical = AMLTransactions(str(tmp_path), "Tiny")
    # amounts and currencies swapped, label first; the two "Account" columns keep their order
    order = [10, 7, 8, 0, 1, 2, 3, 4, 5, 6, 9]
    other = tmp_path / "other"
    other.mkdir()
    _write(other / "Tiny_Trans.csv", [COLUMNS[i] for i in order],
           [[row[i] for i in order] for row in ROWS])
    shuffled = AMLTransactions(str(other), "Tiny")
    assert shuffled.accounts == canonical.accounts
    for key in ("edge_attr", "y", "edge_time"):
        assert torch.equal(getattr(shuffled, key), getattr(canonical, key)), key
    assert torch.equal(shuffled.graph.edge_index, canonical.graph.edge_index)


def test_a_non_utf8_byte_names_its_line_and_column(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    raw = (tmp_path / "Tiny_Trans.csv").read_bytes().split(b"\n")
    raw[3] = raw[3].replace(b"Euro", b"Eur\xe9", 1)
    (tmp_path / "Tiny_Trans.csv").write_bytes(b"\n".join(raw))
    column = raw[3].index(b"\xe9") + 1
    with pytest.raises(ValueError, match=rf"Tiny_Trans.csv, line 4: byte 0xe9 at column "
                                         rf"{column} is not UTF-8 text"):
        AMLTransactions(str(tmp_path), "Tiny")


@pytest.mark.parametrize("fractions", [(0.9, 0.5), (0.0, 0.2), (0.6,), (0.6, -0.1)])
def test_split_fractions_are_checked(fractions):
    with pytest.raises(ValueError, match="fractions must be"):
        temporal_split(torch.arange(10.0), fractions)


def test_a_byte_order_mark_before_the_header_is_read_past(tmp_path):
    _write(tmp_path / "Tiny_Trans.csv", COLUMNS, ROWS)
    canonical = AMLTransactions(str(tmp_path), "Tiny")
    other = tmp_path / "bom"
    other.mkdir()
    (other / "Tiny_Trans.csv").write_bytes(b"\xef\xbb\xbf" +
                                           (tmp_path / "Tiny_Trans.csv").read_bytes())
    marked = AMLTransactions(str(other), "Tiny")
    assert marked.accounts == canonical.accounts
    assert torch.equal(marked.edge_attr, canonical.edge_attr)


@pytest.mark.parametrize("call,match", [
    (lambda: AMLTransactions(None), "AMLTransactions: root must be a path, got NoneType"),
    (lambda: AMLTransactions("data", name=3), "AMLTransactions: name must be a name"),
    (lambda: temporal_split([3, 1, 2]), "temporal_split: time must be a 1-D tensor"),
    (lambda: daily_split([3, 1, 2]), "daily_split: time must be a 1-D tensor"),
    (lambda: daily_split(torch.arange(3.0), (0.5, 0.5)), "fractions must be \\(train, "),
    (lambda: daily_split(torch.tensor([0.0, float("nan"), 9e4])),
     r"daily_split: time must be finite seconds .* sorted; got \[0.0, nan, 90000.0\]"),
    (lambda: daily_split(torch.tensor([9e4, 0.0])), r"time must be finite .* got \[90000.0, "),
    (lambda: daily_split(torch.tensor([-5.0, 9e4])), r"time must be finite .*\(>= 0\)"),
    (lambda: synthetic_transactions(num_accounts="50"), "num_accounts must be an integer >= 20"),
    (lambda: synthetic_transactions(num_transactions=None),
     "num_transactions must be an integer >= 100"),
])
def test_bad_arguments_are_named(call, match):
    """Junk that failed in os.path.join, in `.numel()` or in a comparison ("'<' not
    supported"), naming no argument."""
    with pytest.raises((TypeError, ValueError), match=match):
        call()
