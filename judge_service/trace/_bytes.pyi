# The compiled byte gather's types (_bytes.pyx); it equals `LoadedTokenizer._joined`.
import numpy as np
import numpy.typing as npt

def gather(
    ids: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    blob: npt.NDArray[np.uint8],
) -> bytes: ...
