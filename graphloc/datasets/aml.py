"""Transaction multigraphs for anti-money-laundering edge classification: a reader of the
IBM synthetic AML transactions CSV format (Altman et al., NeurIPS 2023 datasets track) and
an offline generator of the same format with planted laundering patterns.

The IBM files sit behind a Kaggle login, so nothing is downloaded: ``AMLTransactions``
reads ``<root>/<name>_Trans.csv`` (and, when present, ``<root>/<name>_accounts.csv`` to
validate the accounts), and says exactly where to put the file when it is missing.
"""

from __future__ import annotations

import csv
import math
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
import torch
from torch import Tensor

from graphloc.checks import check_int, check_seed, check_text
from graphloc.graph import Graph
from graphloc.io import atomic_save, load_file

SOURCE_URL = "https://www.kaggle.com/datasets/ealtman2019/ibm-transactions-for-anti-money-laundering-aml"
#: the header of the IBM files ("Account" twice: sender, then receiver)
COLUMNS = ["Timestamp", "From Bank", "Account", "To Bank", "Account", "Amount Received",
           "Receiving Currency", "Amount Paid", "Payment Currency", "Payment Format",
           "Is Laundering"]
ACCOUNT_COLUMNS = ["Bank Name", "Bank ID", "Account Number", "Entity ID", "Entity Name"]
TIME_FORMAT = "%Y/%m/%d %H:%M"
_VERSION = 2  # of the processed cache (2: MEGA-GNN's features kept beside graphloc's)
#: what AMLTransactions builds: graphloc's features and time-quantile split, or the data of
#: the MEGA-GNN and Multi-GNN code (``get_data`` on ``format_kaggle_files``' output)
PROTOCOLS = ("graphloc", "mega-gnn")
MEGA_GNN_FEATURES = ["Timestamp", "Amount Received", "Received Currency", "Payment Format"]


@dataclass
class EdgeDataset:
    """A multigraph with one label per edge and a temporal split of the edges.

    Edges are sorted by time (``edge_time``, seconds since the first transaction), so the
    training edges come first; ``split_graph(split)`` is the graph known at the end of a
    split (train: train edges; val: train and validation; test: all), the protocol of the
    MEGA-GNN and Multi-GNN papers. ``x`` is a constant feature per account.
    """

    name: str
    graph: Graph
    x: Tensor
    edge_attr: Tensor
    edge_time: Tensor
    y: Tensor
    train_index: Tensor
    val_index: Tensor
    test_index: Tensor
    accounts: list[str] = field(default_factory=list)
    feature_names: list[str] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_edges(self) -> int:
        return self.graph.num_edges

    def split_graph(self, split: str) -> Graph:
        """The graph of the edges up to the end of ``split`` (edge ids are a prefix)."""
        end = self._split_end(split)
        return self.graph.cached(("split", split), lambda: Graph(
            self.graph.edge_index[:, :end], num_nodes=self.num_nodes))

    def normalized_edge_attr(self, split: str) -> Tensor:
        """The edge features of ``split_graph(split)``, each column z-normalised by the
        mean and standard deviation over that graph's own edges (a deviation of 0 taken
        as 1): MEGA-GNN's and Multi-GNN's ``get_data`` normalises the training, validation
        and test graphs each by itself, so one transaction's features differ between
        them."""
        features = self.edge_attr[:self._split_end(split)].float()
        std = features.std(0) if features.size(0) > 1 else torch.zeros(features.size(1))
        return (features - features.mean(0)) / torch.where(std == 0, 1.0, std)

    def _split_end(self, split: str) -> int:
        ends = {"train": self.train_index, "val": self.val_index, "test": self.test_index}
        if split not in ends:
            raise ValueError(f"split must be 'train', 'val' or 'test', got {split!r}")
        return int(ends[split].max()) + 1 if ends[split].numel() else 0


def _check_header(header: list[str], expected: list[str], path: str) -> None:
    missing = [c for c in dict.fromkeys(expected) if header.count(c) < expected.count(c)]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected the columns "
                         f"{expected}, got {header}")


def _text_lines(path: str):
    """The file's lines decoded as UTF-8; a byte that is not names its line and column
    (a text-mode file decodes in blocks, so its error could not say which line)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                yield raw.decode("utf-8-sig" if number == 1 else "utf-8")  # a BOM
            except UnicodeDecodeError as err:
                raise ValueError(f"{path}, line {number}: byte {raw[err.start]:#04x} at "
                                 f"column {err.start + 1} is not UTF-8 text") from None


def _positions(header: list[str], path: str) -> dict[str, int]:
    """Column name -> index in this file's header, so columns may come in any order. The
    IBM files name both account columns "Account": the first is the sender's, the second
    the receiver's; they are keyed "Account" and "Account (to)"."""
    _check_header(header, COLUMNS, path)
    positions = {name: header.index(name) for name in COLUMNS if name != "Account"}
    accounts = [i for i, name in enumerate(header) if name == "Account"]
    positions["Account"], positions["Account (to)"] = accounts[0], accounts[1]
    return positions


def _read_accounts(path: str) -> set[tuple[str, str]]:
    rows = csv.reader(_text_lines(path))
    header = next(rows, [])
    _check_header(header, ACCOUNT_COLUMNS, path)
    bank, number = header.index("Bank ID"), header.index("Account Number")
    return {(_bank(r[bank]), r[number]) for r in rows if r}


def _bank(code: str) -> str:
    return code.lstrip("0") or "0"  # the files write bank 10 as "010" and "10"


def _parse_rows(path: str, known: set[tuple[str, str]] | None):
    """Columns of the transactions file as lists, every value validated; columns are read
    by their header names."""
    rows = csv.reader(_text_lines(path))
    header = next(rows, [])
    at = _positions(header, path)
    cols = {name: [] for name in ("time", "src", "dst", "received", "recv_cur", "paid",
                                  "paid_cur", "format", "label")}
    for line, row in enumerate(rows, start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ValueError(f"{path}, line {line}: {len(row)} fields, expected "
                             f"{len(header)}: {row}")
        field = {name: row[i] for name, i in at.items()}
        cols["time"].append(_timestamp(field["Timestamp"], path, line))
        for key, bank, account in (("src", field["From Bank"], field["Account"]),
                                   ("dst", field["To Bank"], field["Account (to)"])):
            if not account or (known is not None and (_bank(bank), account) not in known):
                raise ValueError(f"{path}, line {line}: unknown account id {account!r} "
                                 f"of bank {bank!r}")
            cols[key].append(f"{_bank(bank)}:{account}")
        for key, column in (("received", "Amount Received"), ("paid", "Amount Paid")):
            cols[key].append(_amount(field[column], column, path, line))
        if field["Is Laundering"] not in ("0", "1"):
            raise ValueError(f"{path}, line {line}: 'Is Laundering' must be 0 or 1, got "
                             f"{field['Is Laundering']!r}")
        cols["recv_cur"].append(field["Receiving Currency"])
        cols["paid_cur"].append(field["Payment Currency"])
        cols["format"].append(field["Payment Format"])
        cols["label"].append(int(field["Is Laundering"]))
    if not cols["time"]:
        raise ValueError(f"{path} holds no transactions")
    return cols


def _timestamp(text: str, path: str, line: int) -> float:
    try:
        return datetime.strptime(text, TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ValueError(f"{path}, line {line}: bad timestamp {text!r}, expected the format "
                         "YYYY/MM/DD HH:MM") from None


def _amount(text: str, column: str, path: str, line: int) -> float:
    try:
        amount = float(text)
    except ValueError:
        amount = -1.0
    if not amount >= 0 or math.isinf(amount):
        raise ValueError(f"{path}, line {line}: bad {column} {text!r} (a number >= 0)")
    return amount


def _one_hot(values: list[str], prefix: str) -> tuple[np.ndarray, list[str]]:
    vocab = sorted(set(values))
    codes = np.searchsorted(np.array(vocab), np.array(values))
    return np.eye(len(vocab), dtype=np.float32)[codes], [f"{prefix}={v}" for v in vocab]


def _build(cols, name: str) -> dict:
    accounts = sorted(set(cols["src"]) | set(cols["dst"]))
    node_of = {a: i for i, a in enumerate(accounts)}
    time = np.asarray(cols["time"], dtype=np.float64)
    order = np.argsort(time, kind="stable")
    blocks = [np.log1p(np.asarray(cols["received"], dtype=np.float32))[:, None],
              np.log1p(np.asarray(cols["paid"], dtype=np.float32))[:, None]]
    names = ["log1p amount received", "log1p amount paid"]
    for key, prefix in (("recv_cur", "receiving currency"), ("paid_cur", "payment currency"),
                        ("format", "payment format")):
        block, block_names = _one_hot(cols[key], prefix)
        blocks.append(block)
        names += block_names
    edge_index = torch.tensor([[node_of[a] for a in cols["src"]],
                               [node_of[a] for a in cols["dst"]]])[:, order]
    t = torch.from_numpy(time[order] - time[order][0])
    return {"version": _VERSION, "name": name, "accounts": accounts, "edge_index": edge_index,
            "edge_attr": torch.from_numpy(np.concatenate(blocks, axis=1)[order]),
            "mega_gnn_edge_attr": _mega_gnn_features(cols, time)[order],
            "edge_time": t, "y": torch.tensor(cols["label"])[order], "feature_names": names}


def _mega_gnn_features(cols, time: np.ndarray) -> Tensor:
    """The four edge features of the MEGA-GNN and Multi-GNN code, in file order: seconds
    since the first transaction, the amount received, and the codes that
    ``format_kaggle_files`` gives the receiving currency (one numbering for receiving and
    payment currencies, by first appearance, each row's receiving one first) and the
    payment format (by first appearance)."""
    currencies: dict[str, int] = {}
    formats: dict[str, int] = {}
    received_codes, format_codes = [], []
    for received, paid, fmt in zip(cols["recv_cur"], cols["paid_cur"], cols["format"],
                                   strict=True):
        received_codes.append(currencies.setdefault(received, len(currencies)))
        currencies.setdefault(paid, len(currencies))
        format_codes.append(formats.setdefault(fmt, len(formats)))
    features = np.stack([time - time.min(), np.asarray(cols["received"]),
                         np.asarray(received_codes), np.asarray(format_codes)], axis=1)
    return torch.from_numpy(features.astype(np.float32))


def daily_split(time: Tensor, fractions=(0.6, 0.2, 0.2)) -> tuple[Tensor, Tensor, Tensor]:
    """MEGA-GNN's and Multi-GNN's split: whole days (``time`` in seconds since the first
    transaction, sorted; day d holds [d, d + 1) x 86,400 s), train days [0, i), validation
    [i, j), test [j, last], the (i, j) whose largest relative error against ``fractions``
    is smallest (the first such pair in lexicographic order). Returns edge ids."""
    if not isinstance(time, Tensor) or time.dim() != 1:
        shape = list(time.shape) if isinstance(time, Tensor) else type(time).__name__
        raise ValueError(f"daily_split: time must be a 1-D tensor of sorted seconds, got "
                         f"{shape}")
    if len(fractions) != 3 or not all(0 < f < 1 for f in fractions):
        raise ValueError(f"fractions must be (train, validation, test), each in (0, 1), got "
                         f"{fractions}")
    if time.numel() and not (time.isfinite().all() and time[0] >= 0
                             and (time[1:] >= time[:-1]).all()):
        raise ValueError("daily_split: time must be finite seconds since the first "
                         "transaction (>= 0), sorted; got "
                         f"{time[:5].tolist()}{' ...' if time.numel() > 5 else ''}")
    day = torch.div(time, 86_400, rounding_mode="floor").long()
    counts = torch.bincount(day).double()  # a day without transactions counts 0
    if counts.numel() < 2:
        raise ValueError(f"daily_split: the transactions span {counts.numel()} day; the split "
                         "needs at least 2")
    cum = torch.cat([torch.zeros(1, dtype=torch.float64), counts.cumsum(0)])
    total, best = float(cum[-1]), None
    for i in range(counts.numel()):
        for j in range(i + 1, counts.numel()):
            shares = (float(cum[i]), float(cum[j] - cum[i]), total - float(cum[j]))
            score = max(abs(v / total - t) / t for v, t in zip(shares, fractions, strict=True))
            if best is None or score < best[0]:
                best = (score, int(cum[i]), int(cum[j]))
    ids = torch.arange(time.numel())
    return ids[:best[1]], ids[best[1]:best[2]], ids[best[2]:]


def temporal_split(time: Tensor, fractions=(0.6, 0.2)) -> tuple[Tensor, Tensor, Tensor]:
    """Edge ids of sorted ``time`` cut at the 60% and 80% quantiles; edges sharing a
    timestamp stay in one split."""
    if not isinstance(time, Tensor) or time.dim() != 1:
        shape = list(time.shape) if isinstance(time, Tensor) else type(time).__name__
        raise ValueError(f"temporal_split: time must be a 1-D tensor of sorted timestamps, "
                         f"got {shape}")
    if len(fractions) != 2 or not all(0 < f < 1 for f in fractions) or sum(fractions) >= 1:
        raise ValueError(f"fractions must be (train, validation), each in (0, 1) and summing "
                         f"to less than 1 (the rest is test), got {fractions}")
    n = time.numel()
    cuts = []
    for q in np.cumsum(fractions):
        at = min(n - 1, math.ceil(q * n))
        cuts.append(int(torch.searchsorted(time, time[at], right=False)))
    ids = torch.arange(n)
    return ids[:cuts[0]], ids[cuts[0]:cuts[1]], ids[cuts[1]:]


def AMLTransactions(root: str, name: str = "HI-Small",  # noqa: N802
                    protocol: str = "graphloc") -> EdgeDataset:
    """The IBM AML transactions ``name`` (HI-Small, LI-Small, HI-Medium, ...) as an
    :class:`EdgeDataset`: accounts as nodes (``bank:account``), transactions as edges in
    time order, labels ``Is Laundering``, the time in ``edge_time``. The parsed result is
    cached in ``<root>/processed/``; a changed CSV is parsed again.

    ``protocol="graphloc"``: features log1p amounts received and paid, one-hot receiving
    and payment currencies and payment format; ``x`` ones; split 60/20/20 at time
    quantiles (:func:`temporal_split`). ``protocol="mega-gnn"``: the data the MEGA-GNN and
    Multi-GNN code trains on, for numbers comparable with their papers: the four raw
    features ``MEGA_GNN_FEATURES`` (their z-normalisation, per split graph, is
    :meth:`EdgeDataset.normalized_edge_attr`), ``x`` zeros (their all-ones feature after
    that normalisation) and their split by whole days (:func:`daily_split`). Accounts are
    numbered by name here, by first appearance there: the same graph, relabelled."""
    check_text("AMLTransactions", "root", root, path=True)
    check_text("AMLTransactions", "name", name)
    if protocol not in PROTOCOLS:
        raise ValueError(f"AMLTransactions: protocol must be one of {PROTOCOLS}, got "
                         f"{protocol!r}")
    path = os.path.join(root, f"{name}_Trans.csv")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"{path} not found. The IBM AML files need a (free) Kaggle login: download "
            f"{name}_Trans.csv from {SOURCE_URL} and put it at {os.path.abspath(path)} "
            f"(optionally with {name}_accounts.csv beside it, to validate the accounts).")
    accounts_path = os.path.join(root, f"{name}_accounts.csv")
    sources = [p for p in (path, accounts_path) if os.path.isfile(p)]
    stamp = [(os.path.getsize(p), os.path.getmtime(p)) for p in sources]
    cache = os.path.join(root, "processed", f"{name}.pt")
    data = None
    if os.path.isfile(cache):
        data = load_file(cache, "processed AML cache",
                         rebuild="Delete it: it is rebuilt from the CSV.")
    if data is None or data.get("version") != _VERSION or data.get("stamp") != stamp:
        known = _read_accounts(accounts_path) if os.path.isfile(accounts_path) else None
        data = {**_build(_parse_rows(path, known), name), "stamp": stamp}
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        atomic_save(data, cache)
    num_nodes = len(data["accounts"])
    if protocol == "mega-gnn":
        train, val, test = daily_split(data["edge_time"])
        x, edge_attr, names = torch.zeros(num_nodes, 1), data["mega_gnn_edge_attr"], list(
            MEGA_GNN_FEATURES)
    else:
        train, val, test = temporal_split(data["edge_time"])
        x, edge_attr, names = torch.ones(num_nodes, 1), data["edge_attr"], data["feature_names"]
    return EdgeDataset(name=name, graph=Graph(data["edge_index"], num_nodes=num_nodes),
                       x=x, edge_attr=edge_attr, edge_time=data["edge_time"], y=data["y"],
                       train_index=train, val_index=val, test_index=test,
                       accounts=data["accounts"], feature_names=names)


# --- the generator ---------------------------------------------------------------------

_FORMATS = ["ACH", "Cheque", "Credit Card", "Wire", "Cash", "Reinvestment", "Bitcoin"]
_CURRENCIES = ["US Dollar", "Euro", "UK Pound", "Yuan", "Yen"]


class _Writer:
    """Transactions of the generator, in the IBM format."""

    def __init__(self, rng: random.Random, start: datetime, accounts: list[tuple[str, str]]):
        self.rng, self.start, self.accounts, self.rows = rng, start, accounts, []

    def add(self, minute: float, src: int, dst: int, amount: float, fmt: str,
            currency: str, label: int) -> None:
        stamp = (self.start + timedelta(minutes=int(minute))).strftime(TIME_FORMAT)
        (sb, sa), (db, da) = self.accounts[src], self.accounts[dst]
        text = f"{amount:.2f}"
        self.rows.append([stamp, sb, sa, db, da, text, currency, text, currency, fmt,
                          str(label)])


def _normal_activity(w: _Writer, n: int, count: int, days: int) -> None:
    """Background: every account pays a few regular counterparties (recurring, so many
    parallel edges) at spread-out times with varying amounts, plus one-off payments."""
    rng = w.rng
    partners = {a: rng.sample(range(n), k=rng.randint(1, 4)) for a in range(n)}
    currency = {a: rng.choices(_CURRENCIES, weights=[70, 12, 8, 5, 5])[0] for a in range(n)}
    for _ in range(count):
        src = rng.randrange(n)
        dst = rng.choice(partners[src]) if rng.random() < 0.7 else rng.randrange(n)
        if dst == src:
            dst = (src + 1) % n
        amount = math.exp(rng.gauss(7.0, 1.6))
        fmt = rng.choices(_FORMATS, weights=[30, 20, 25, 10, 10, 3, 2])[0]
        w.add(rng.uniform(0, days * 1440), src, dst, amount, fmt, currency[src], 0)


def _pattern(w: _Writer, n: int, days: int) -> None:
    """One laundering pattern (IBM AMLworld's shapes), its edges labelled 1: bursts of
    similar amounts within hours, several transfers per pair (structuring)."""
    rng = w.rng
    kind = rng.choice(["fan-out", "fan-in", "cycle", "scatter-gather", "bipartite", "stack"])
    size = rng.randint(3, 7)
    nodes = rng.sample(range(n), k=2 * size + 2)
    t0 = rng.uniform(0, (days - 1) * 1440)
    base = rng.uniform(3000, 9900)
    fmt = rng.choice(["ACH", "Wire", "Bitcoin", "Cash"])
    hub, other, mids = nodes[0], nodes[1], nodes[2:2 + size]
    tail = nodes[2 + size:]
    if kind == "fan-out":
        pairs = [(hub, m) for m in mids]
    elif kind == "fan-in":
        pairs = [(m, hub) for m in mids]
    elif kind == "cycle":
        ring = [hub, *mids]
        pairs = list(zip(ring, ring[1:] + ring[:1], strict=True))
    elif kind == "scatter-gather":
        pairs = [(hub, m) for m in mids] + [(m, other) for m in mids]
    elif kind == "bipartite":
        pairs = [(a, b) for a in mids[:max(2, size // 2)] for b in tail[:max(2, size // 2)]]
    else:  # stack: two layers of fan-out and fan-in
        pairs = [(hub, m) for m in mids] + [(m, t) for m in mids for t in tail[:2]]
    for step, (src, dst) in enumerate(pairs):
        for _ in range(rng.randint(2, 4)):  # structuring: several transfers per pair
            amount = base * rng.uniform(0.9, 1.0)
            w.add(t0 + 30 * step + rng.uniform(0, 240), src, dst, amount, fmt, "US Dollar", 1)


def synthetic_transactions(num_accounts: int = 2000, num_transactions: int = 50_000,
                           seed: int = 0, root: str = "data/aml", name: str = "Synthetic",
                           laundering_fraction: float = 0.02, days: int = 20) -> str:
    """Writes ``<root>/<name>_Trans.csv`` and ``<root>/<name>_accounts.csv`` in the IBM
    format: background payments between accounts (recurring counterparties, so many
    parallel edges) and planted laundering patterns (fan-out, fan-in, cycle,
    scatter-gather, bipartite, stack) making up about ``laundering_fraction`` of the
    transactions, each pattern a burst of structured transfers. Returns the transactions
    path; ``AMLTransactions(root, name)`` reads it. Deterministic for a seed."""
    check_int(num_accounts, "synthetic_transactions: num_accounts", 20)
    check_int(num_transactions, "synthetic_transactions: num_transactions", 100)
    check_seed(seed, "synthetic_transactions: seed")  # random.Random took 'x' and 1.5 too
    if not 0 < laundering_fraction < 0.5:
        raise ValueError(f"laundering_fraction must lie in (0, 0.5), got {laundering_fraction}")
    rng = random.Random(seed)
    banks = [f"{rng.randrange(1, 3000):03d}" for _ in range(max(2, num_accounts // 50))]
    accounts = [(rng.choice(banks), f"{rng.getrandbits(36):09X}") for _ in range(num_accounts)]
    w = _Writer(rng, datetime(2022, 9, 1), accounts)
    target = int(laundering_fraction * num_transactions)
    while len(w.rows) < target:
        _pattern(w, num_accounts, days)
    _normal_activity(w, num_accounts, num_transactions - len(w.rows), days)
    w.rows.sort(key=lambda r: r[0])
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"{name}_Trans.csv")
    _write_csv(path, COLUMNS, w.rows)
    _write_csv(os.path.join(root, f"{name}_accounts.csv"), ACCOUNT_COLUMNS,
               [[f"Bank {b}", b, a, f"E{i}", f"Entity {i}"] for i, (b, a) in
                enumerate(accounts)])
    return path


def _write_csv(path: str, header: list[str], rows: list[list[str]]) -> None:
    tmp = f"{path}.tmp{os.getpid()}"  # atomic: a reader never sees half a file
    with open(tmp, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(tmp, path)
