"""ATen lowerings, one module per op family; importing registers them."""

from . import (conv, ctc, elementwise, embedding_bag, factories, fft, grouped_mm, histogram, indexing,  # noqa: F401
               linalg, nn, random, reduction, scaled_mm, search, shape, slices, upsample)
from . import max_pool1d  # noqa: F401,E402 - eager CPU's kernel choice
from . import norm_backward  # noqa: F401,E402 - after nn: eager CPU's layer norm backward
from . import group_norm  # noqa: F401,E402 - eager CPU's group norm, forward and backward
from . import embedding_renorm  # noqa: F401,E402
from . import cross_entropy  # noqa: F401,E402 - log_softmax and its backward as eager's kernels
from . import norm_kernel  # noqa: F401,E402 - linalg_vector_norm's 2-norm as eager's kernel
from . import attention  # noqa: F401,E402 - scaled_dot_product_attention as eager's flash kernel
from . import recurrent  # noqa: F401,E402 - LSTM, GRU and RNN layers as one loop each
from . import float8  # noqa: F401,E402 - last: it wraps lowerings of the modules above
