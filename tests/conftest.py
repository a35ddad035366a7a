import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402
import torch  # noqa: E402

import graphloc  # noqa: E402

requires_ext = pytest.mark.skipif(not graphloc.HAS_EXTENSION,
                                  reason="graphloc._C is not built")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
