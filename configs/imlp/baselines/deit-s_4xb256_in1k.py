# DeiT-S: IMLP paper Table 1 host row (22.05M, 4.60G, 79.9 top-1, reported) and Table 9's DeiT-S.
# deit-s-imlp_4xb256_in1k.py without IMLP: mmpretrain's VisionTransformer 'deit-small' (the backbone of
# mmpretrain::deit/deit-small_4xb256_in1k.py; its checkpoints load unchanged) with exactly the +IMLP config's
# recipe (DeiT's main.py defaults, sources in deit-ti-imlp_4xb256_in1k.py). drop_path_rate=0.1 is that recipe's
# (mmpretrain's DeiT-S config: 0).
# Form: inherits the +IMLP config, the one home of the recipe (a change to it reaches both rows), and restates
# the upstream backbone (a few keys) with _delete_=True: mmengine text configs cannot delete ffn_cfg alone.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config and the backbone
# equal to the upstream one (any recipe keys named above aside).
# Not CPVT's deit-s-le_8xb128_in1k.py for the reasons given in deit-ti_4xb256_in1k.py.
_base_ = '../deit-s-imlp_4xb256_in1k.py'

model = dict(
    backbone=dict(_delete_=True, type='VisionTransformer', arch='deit-small', img_size=224, patch_size=16,
                  drop_path_rate=0.1))
