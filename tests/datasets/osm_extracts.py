"""Random OSM XML extracts for checking the City-Networks builder against osmnx 1.x, the
published pipeline's own code (``osmnx_oracle.py`` writes osmnx's answers, which
``test_osm.py`` compares with graphloc's). Pure Python and seeded, so the same extract
comes out under any Python 3.

Each extract is a small pool of nodes joined by public road ways that share nodes: ways
closed into rings, ways that list a node twice in a row, one-way values of every osmnx
kind, roundabouts, several lanes and maxspeed spellings (mph, "50;70", "signals") or
none, so the interesting paths of the simplification and of the speed imputation are met.
"""

import random
from xml.sax.saxutils import quoteattr

HIGHWAYS = ["residential", "primary", "secondary", "service", "footway", "tertiary", "track"]
ONEWAYS = [None] * 6 + ["yes", "no", "-1", "true", "1", "T", "F", "reverse", "reversible"]
LANES = [None] * 3 + ["1", "2", "3", "2;3"]
MAXSPEEDS = [None] * 3 + ["30", "50", "30 mph", "50;70", "signals", "none", "20", "5",
                          "60|80", "12,5"]
#: the seeds the stored osmnx answers cover
SEEDS = range(300)


def _way_nodes(rng: random.Random, pool: list[int], longest: int) -> list[int]:
    nodes = [rng.choice(pool) for _ in range(rng.randint(1, longest))]
    kind = rng.random()
    if kind < 0.15 and len(nodes) >= 3:  # a closed way
        nodes.append(nodes[0])
    elif kind < 0.25 and len(nodes) >= 2:  # a node listed twice in a row
        i = rng.randrange(len(nodes))
        nodes.insert(i, nodes[i])
    return nodes


def _way_tags(rng: random.Random) -> dict[str, str]:
    tags = {"highway": rng.choice(HIGHWAYS)}
    for key, values in (("oneway", ONEWAYS), ("lanes", LANES), ("maxspeed", MAXSPEEDS)):
        value = rng.choice(values)
        if value is not None:
            tags[key] = value
    if rng.random() < 0.08:
        tags["junction"] = "roundabout"
    return tags


def random_extract(seed: int) -> str:
    """An OSM XML document: nodes by id (as extracts and Overpass order them), then ways."""
    rng = random.Random(seed)
    big = rng.random() < 0.3
    pool = rng.sample(range(1, 100), rng.randint(4, 60 if big else 25))
    ways = [(1000 + w, _way_nodes(rng, pool, 12 if big else 6), _way_tags(rng))
            for w in range(rng.randint(1, 25 if big else 10))]
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', '<osm version="0.6" generator="test">']
    for node in sorted({n for _, nodes, _ in ways for n in nodes}):
        lat, lon = 60.0 + rng.random() * 0.01, 24.0 + rng.random() * 0.01
        lines.append(f'  <node id="{node}" lat="{lat:.7f}" lon="{lon:.7f}" version="1"/>')
    for way, nodes, tags in ways:
        lines.append(f'  <way id="{way}" version="1">')
        lines += [f'    <nd ref="{n}"/>' for n in nodes]
        lines += [f'    <tag k="{k}" v={quoteattr(v)}/>' for k, v in tags.items()]
        lines.append("  </way>")
    return "\n".join(lines + ["</osm>", ""])


def canonical(value) -> str:
    """An attribute as text, a merged street's list sorted (osmnx keeps an unordered set)."""
    return str(sorted(map(str, value))) if isinstance(value, list) else str(value)


ATTRIBUTES = ("osmid", "highway", "oneway", "reversed", "lanes", "maxspeed")


def street_row(u, v, attrs: dict, length: float, speed: float) -> list:
    """One simplified street as compared: ends, attributes (None where absent), length
    and speed as they are (osmnx rounds each edge's length to the millimetre before the
    simplification sums them, and speeds to 0.1 km/h)."""
    values = [canonical(attrs[k]) if attrs.get(k) is not None else None for k in ATTRIBUTES]
    return [str(u), str(v), *values, float(length), float(speed)]
