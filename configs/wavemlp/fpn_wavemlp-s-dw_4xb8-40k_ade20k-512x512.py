# Semantic FPN with Wave-MLP-S on ADE20K; paper Table 4 (reported): 31.2M / 168G, 44.4 mIoU
# (FLOPs at 2048x512). Recipe (paper Sec. 4.3, PVT): 40k iterations, batch 32 (4 GPUs x 8),
# AdamW lr 1e-4 wd 1e-4, poly decay power 0.9, 512x512 random crops, test shorter side 512.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: no official weights; pretrain wavemlp-s-dw_8xb128_in1k.py and save the
# classifier checkpoint as checkpoints/wavemlp-s-dw_in1k_mmposmlp.pth.
# The segmentor and recipe of fpn_wavemlp-s_4xb8-40k_ade20k-512x512.py; only the backbone differs.
_base_ = './fpn_wavemlp-s_4xb8-40k_ade20k-512x512.py'

model = dict(backbone=dict(
    phase_mode='depthwise', init_cfg=dict(checkpoint='checkpoints/wavemlp-s-dw_in1k_mmposmlp.pth')))
