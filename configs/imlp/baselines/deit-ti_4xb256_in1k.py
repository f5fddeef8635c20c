# DeiT-Ti: IMLP paper Table 1 host row (5.72M, 1.26G, 72.2 top-1, reported), also the baseline of Tables 2-4
# and 9. deit-ti-imlp_4xb256_in1k.py without IMLP: mmpretrain's VisionTransformer 'deit-tiny' (the backbone of
# mmpretrain::deit/deit-tiny_4xb256_in1k.py; its checkpoints load unchanged) trained with exactly the +IMLP
# config's recipe, DeiT's main.py defaults (sources there): the paper trains its hosts "exactly as the original
# methods". drop_path_rate=0.1 is that recipe's (mmpretrain's DeiT-Ti config: 0).
# Form: inherits the +IMLP config, the one home of the recipe (a change to it reaches both rows), and restates
# the upstream backbone (a few keys) with _delete_=True: mmengine text configs cannot delete ffn_cfg alone.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config and the backbone
# equal to the upstream one (any recipe keys named above aside).
# CPVT's configs/cpvt/paper_tables/deit-ti-le_8xb128_in1k.py is DeiT-Ti with the same DeiT recipe but not this
# config: 8 x 128 images per step (here 4 x 256), CPVT's own backbone and head (LinearClsHead) and its
# weight-decay keys; the test lists the differences.
_base_ = '../deit-ti-imlp_4xb256_in1k.py'

model = dict(
    backbone=dict(_delete_=True, type='VisionTransformer', arch='deit-tiny', img_size=224, patch_size=16,
                  drop_path_rate=0.1))
