# DeiT-B + IMLP* (n = 5): Table 1 (73.66M, 14.92G, 81.8, reported).
# deit-ti-imlp_4xb256_in1k.py (every block's MLP an IMLP, r = 2, two AGeLUs, here a 5x5 depthwise conv + BN +
# GELU; DeiT's official recipe, sources there) at the size of the upstream config
# mmpretrain::deit/deit-base_16xb64_in1k.py (arch 'deit-base', 768-wide head, 16 GPUs x 64 images), from which it
# differs only in the FFNs and that recipe. mmpretrain's DeiT-B config adds an EMAHook; as for the smaller
# sizes there is none here: DeiT keeps an EMA of the weights (decay 0.99996) but evaluates and reports the raw
# model (the hook would evaluate the EMA weights instead).
_base_ = './deit-ti-imlp_4xb256_in1k.py'

model = dict(
    backbone=dict(arch='deit-base', ffn_cfg=dict(kernel_size=5)),
    head=dict(in_channels=768))
train_dataloader = dict(batch_size=64)
