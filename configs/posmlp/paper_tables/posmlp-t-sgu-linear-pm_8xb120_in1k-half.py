# PosMLP appendix Table 10, "Hierarchical, PE Conv, PM Linear" (23.3M, 5.27G, 75.43 top-1; paper): the
# ConvLHS model of ./posmlp-t-sgu_8xb120_in1k-half.py (PosMLP-T with gMLP's SGU, ConvPE kept) with Swin's
# non-overlapping patch merging instead of ConvPM: 2x2 concat + LayerNorm(4C, eps 1e-6) + bias-free
# Linear(4C, 2C) (mmcv PatchMerging; the paper says only "Linear mapping", this is the standard form).
# ImageNet-1K^0.5, recipe of the SGU row.
_base_ = ['./posmlp-t-sgu_8xb120_in1k-half.py']
model = dict(backbone=dict(downsample_cfg=dict(type='linear')))
