# The compiled near-duplicate count's types (_similar.pyx); it equals its Python definition.
import numpy as np
import numpy.typing as npt

def similar_units(
    ids: npt.NDArray[np.int64],
    lengths: list[int],
    threshold: float,
    max_postings: int,
    probes_per_lookup: int,
    base_probes: int,
) -> list[int] | None: ...
