# PoolFormer-M48: IMLP paper Table 1 host row (73.47M, 11.56G, 82.5 top-1, reported).
# poolformer-m48-imlp_32xb128_in1k.py without IMLP: mmpretrain's PoolFormer 'm48' (the backbone of
# mmpretrain::poolformer/poolformer-m48_32xb128_in1k.py with its init_cfg; its checkpoints load unchanged) with
# exactly the +IMLP config's recipe: PoolFormer's official train.py (sources in
# poolformer-s12-imlp_32xb128_in1k.py). Recipe keys in the backbone: drop path 0.4 (official README) and
# frozen_stages=-1 (the official code trains the stem; mmpretrain's default 0 freezes it).
# Form: inherits the +IMLP config, the one home of the recipe (a change to it reaches both rows), and restates
# the upstream backbone (a few keys) with _delete_=True: mmengine text configs cannot delete ffn_cfg alone.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config and the backbone
# equal to the upstream one (any recipe keys named above aside).
_base_ = '../poolformer-m48-imlp_32xb128_in1k.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='PoolFormer',
        arch='m48',
        frozen_stages=-1,
        drop_path_rate=0.4,
        init_cfg=[
            dict(type='TruncNormal', layer=['Conv2d', 'Linear'], std=.02, bias=0.),
            dict(type='Constant', layer=['GroupNorm'], val=1., bias=0.),
        ]))
