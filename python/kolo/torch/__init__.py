"""kolo.torch: a drop-in for horovod.torch (``import kolo.torch as hvd``).

Collectives on CPU and CUDA torch tensors with Horovod's names, defaults,
return types and exceptions; see kolo/torch/mpi_ops.py. Launch scripts with
``kolorun -np N /usr/bin/python3 script.py``.
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError(
        'kolo.torch needs PyTorch, which this interpreter cannot import '
        f'({_e}). On Debian: apt-get install -y python3-torch, and run '
        'Debian\'s /usr/bin/python3 (the python3 first on PATH may be another '
        'interpreter without torch).') from _e

from kolo.common.exceptions import HorovodInternalError  # noqa: F401
from kolo.torch.compression import Compression  # noqa: F401
from kolo.torch.mpi_ops import (  # noqa: F401
    Adasum, Average, Max, Min, Product, Sum,
    ProcessSet, add_process_set, global_process_set, remove_process_set,
    allgather, allgather_async, allreduce, allreduce_, allreduce_async,
    allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, ccl_built, cross_rank,
    cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    grouped_allgather, grouped_allgather_async, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
    grouped_reducescatter, grouped_reducescatter_async, init,
    is_homogeneous, is_initialized, join, local_rank, local_size, mpi_built, mpi_enabled,
    mpi_threads_supported, nccl_built, poll, rank, reducescatter,
    reducescatter_async, rocm_built, shutdown, size, start_timeline,
    stop_timeline, synchronize)
from kolo.torch.functions import (  # noqa: F401
    allgather_object, broadcast_object, broadcast_optimizer_state,
    broadcast_parameters)
from kolo.torch.optimizer import DistributedOptimizer  # noqa: F401
from kolo.torch.sparse import sparse_allreduce_async  # noqa: F401
from kolo.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from kolo.torch import elastic  # noqa: F401,E402
