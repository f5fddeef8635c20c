# mmposmlp's Runner (mmposmlp/engine/runner.py): mmengine's Runner with exact resume, atomic plain-data checkpoints,
# data-only checkpoint loading and pre-flight checks. Every library's tools/train.py and tools/test.py build it
# (`RUNNERS.build(cfg)` when a config names a runner_type); every shipped config inherits this file.
runner_type = 'mmposmlp.Runner'
