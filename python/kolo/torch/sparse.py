"""kolo.torch.sparse: ``sparse_allreduce_async``, Horovod's allreduce of a
sparse (COO) tensor: every rank's indices and values are allgathered (as
``<name>.indices`` and ``<name>.values``) and the result is a sparse tensor
holding them all (duplicates are summed when it is coalesced); Average
divides the values by the set size. It returns a callable (not a handle)
that waits and returns the result.

Thread-safety: as the collectives it uses.
"""

from kolo.common.basics import Average
from kolo.common.process_sets import global_process_set
from kolo.torch.mpi_ops import allgather_async, synchronize


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Starts the allreduce of a sparse tensor; call the result to wait."""
    t = tensor
    indices_handle = allgather_async(
        t._indices().transpose(0, 1).contiguous(), name=f'{name}.indices',
        process_set=process_set)
    values_handle = allgather_async(t._values(), name=f'{name}.values',
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        if op == Average:
            values = values / process_set.size()
        if indices.dim() == 0 or indices.numel() == 0:
            indices = indices.reshape(0, t.sparse_dim())
        return t.new(indices.transpose(0, 1), values, t.size())

    return handle
