# The compiled loop's types (_spans.pyx); it equals rules_judge.python_disjoint_spans.
from array import array

import numpy as np
import numpy.typing as npt

def disjoint_spans(firsts: list[int], lasts: list[int]) -> list[tuple[int, int, int]]: ...
def disjoint_ranges(
    firsts: npt.NDArray[np.int64], lasts: npt.NDArray[np.int64]
) -> tuple[array[int], array[int], array[int]]: ...
