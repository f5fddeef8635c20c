# PosMLP appendix Table 10, "Hierarchical, PE Linear, PM Conv" (21.8M, 4.93G, 75.81 top-1; paper): the
# ConvLHS model of ./posmlp-t-sgu_8xb120_in1k-half.py (PosMLP-T with gMLP's SGU, ConvPM kept) with a
# non-overlapping patch embedding instead of ConvPE: a 4x4/stride-4 conv + LayerNorm (eps 1e-6) (mmcv
# PatchEmbed, Swin's; the paper says only "Linear mapping", this is the standard form and the official
# PatchEmbed's at patch 4). ImageNet-1K^0.5, recipe of the SGU row.
_base_ = ['./posmlp-t-sgu_8xb120_in1k-half.py']
model = dict(backbone=dict(patch_embed_cfg=dict(type='linear', patch_size=4)))
