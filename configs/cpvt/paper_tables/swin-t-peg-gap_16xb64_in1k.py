# CPVT Table 15 / B.5 "Swin-tiny+PEG+GAP": Swin-T with one PEG (depthwise 3x3, zero padding, residual)
# after the first block of each stage ("position 0 of each stage", Sec. 4.5); Swin-T has no absolute
# position embedding and a GAP head already, and keeps its window relative-position bias. Paper: 29M
# params, 4.5G FLOPs, 82.3 top-1 (Fig. 4: 82.25 vs Swin-T 81.10). The paper does not give the recipe;
# we keep Swin-T's own (mmpretrain's swin-tiny_16xb64_in1k.py = the official Swin recipe: 300 epochs,
# batch 1024, AdamW, cosine, 20 warm-up epochs, grad clip 5), with no weight decay on the PEGs (as
# CPVT / Twins do).
_base_ = ['mmpretrain::swin_transformer/swin-tiny_16xb64_in1k.py', '../../_base_/runner.py']
custom_imports = dict(imports=['mmposmlp.models'], allow_failed_imports=False)

model = dict(backbone=dict(type='mmposmlp.SwinPEG', peg_positions=(0, )))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.pegs.': dict(decay_mult=0.0)}))
