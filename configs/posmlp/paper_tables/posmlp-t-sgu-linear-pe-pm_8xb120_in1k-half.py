# PosMLP appendix Table 10, "Hierarchical, PE Linear, PM Linear" (23.3M, 5.10G, 74.68 top-1; paper): the
# ConvLHS model of ./posmlp-t-sgu_8xb120_in1k-half.py (PosMLP-T with gMLP's SGU) with both downsampling
# modules non-overlapping. The paper names them only "Linear mapping"; we take the standard forms (Swin):
# patch embedding = a 4x4/stride-4 conv + LayerNorm (mmcv PatchEmbed; the official PatchEmbed's form at
# patch 4), patch merging = 2x2 concat + LayerNorm(4C) + bias-free Linear(4C, 2C) (mmcv PatchMerging; the
# official PatchMerging is meant to be this but does not run). LayerNorm eps 1e-6 as every PosMLP norm.
# Measured 23.29M / 5.10G (tools/analysis/complexity.py). ImageNet-1K^0.5, recipe of the SGU row.
_base_ = ['./posmlp-t-sgu_8xb120_in1k-half.py']
model = dict(backbone=dict(patch_embed_cfg=dict(type='linear', patch_size=4), downsample_cfg=dict(type='linear')))
