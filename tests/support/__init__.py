"""What the tests run in processes of their own: the fork server of the command-line tests (``cli_process``,
``cli_preload``), the torchrun and Lightning workers (``distributed_worker``, ``sharded_worker``,
``lightning_worker``) and the tiny local language model of the harness tests (``tiny_lm``)."""
