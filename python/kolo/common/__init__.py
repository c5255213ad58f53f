"""kolo.common: what every framework binding shares (as horovod.common)."""
