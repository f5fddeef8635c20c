# Swin-Ti: IMLP paper Table 1 host row (28.29M, 4.50G, 81.2 top-1, reported).
# swin-t-imlp_16xb64_in1k.py without IMLP: mmpretrain's SwinTransformer 'tiny' (the backbone of
# mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py, drop path 0.2; its checkpoints load unchanged) with
# exactly the +IMLP config's recipe: the official Swin trainer's per-iteration timm cosine after a 20-epoch
# warm-up and gradient clipping at 5 (sources in swin-t-imlp_16xb64_in1k.py).
# Form: inherits the +IMLP config, the one home of the recipe (a change to it reaches both rows), and restates
# the upstream backbone (a few keys) with _delete_=True: mmengine text configs cannot delete ffn_cfg alone.
# tests/test_imlp_baselines.py proves everything but the backbone equal to the +IMLP config and the backbone
# equal to the upstream one (any recipe keys named above aside).
_base_ = '../swin-t-imlp_16xb64_in1k.py'

model = dict(backbone=dict(_delete_=True, type='SwinTransformer', arch='tiny', img_size=224, drop_path_rate=0.2))
