# DeiT-B: IMLP paper Table 1 host row (86.57M, 17.57G, 81.8 top-1, reported) and Table 9's DeiT-B.
# deit-b-imlp_16xb64_in1k.py without IMLP: mmpretrain's VisionTransformer 'deit-base' (the backbone of
# mmpretrain::deit/deit-base_16xb64_in1k.py, drop path 0.1 there too; its checkpoints load unchanged) with
# exactly the +IMLP config's recipe (DeiT's main.py defaults, sources in deit-ti-imlp_4xb256_in1k.py; no
# EMAHook, as there).
# Form: inherits the +IMLP config, the one home of the recipe (a change to it reaches both rows), and restates
# the upstream backbone (a few keys) with _delete_=True: mmengine text configs cannot delete ffn_cfg alone.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config and the backbone
# equal to the upstream one (any recipe keys named above aside).
# Not CPVT's deit-b-le_8xb128_in1k.py for the reasons given in deit-ti_4xb256_in1k.py (here 16 x 64 images).
_base_ = '../deit-b-imlp_16xb64_in1k.py'

model = dict(
    backbone=dict(_delete_=True, type='VisionTransformer', arch='deit-base', img_size=224, patch_size=16,
                  drop_path_rate=0.1))
