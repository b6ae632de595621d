"""What tests and benchmarks share, kept out of the wheel: the scripted provider servers
(``scripted/``, real SDKs on loopback), the hostile span submissions (``attacks``,
``attacks_lines``), small local tokenizers and synthetic traces (``tokenizers``) and the
real llama.cpp model server (``llama_server``). Import as ``tests.harness...`` from the
repository root (pytest's rootdir; the benches put it on ``sys.path``)."""
