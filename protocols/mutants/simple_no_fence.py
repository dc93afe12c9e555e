"""mutant-simple-no-fence: Simple without the fence between data and step counter."""
from __future__ import annotations

from protocols.simple import Simple


class SimpleNoFence(Simple):
    """Simple with ``fence=False``: weak data stores, then a relaxed step-counter store.

    With no ``fence.acq_rel.sys`` (and no release on the counter) the
    counter can become visible before the data: the receiver's loads race
    with the sender's stores and may read old data.
    """

    name = "mutant-simple-no-fence"
    expected_violation = "data-race"
    default_params = {**Simple.default_params, "fence": False}
