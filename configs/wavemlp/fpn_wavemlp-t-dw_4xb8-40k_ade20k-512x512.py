# Semantic FPN with Wave-MLP-T on ADE20K; paper Table 4 (reported): 19.3M / 131G, 41.2 mIoU
# (FLOPs at 2048x512). Recipe (paper Sec. 4.3, PVT): 40k iterations, batch 32 (4 GPUs x 8),
# AdamW lr 1e-4 wd 1e-4, poly decay power 0.9, 512x512 random crops, test shorter side 512.
# Depthwise phase estimation: the configuration whose params match paper Tables 3-4
# (see README: the tables' sizes fit the depthwise phase at every size).
# Backbone: the official WaveMLP_T_dw (T*) weights, downloaded by URL and converted on load.
# The segmentor and recipe of fpn_wavemlp-t_4xb8-40k_ade20k-512x512.py; only the backbone differs.
_base_ = './fpn_wavemlp-t_4xb8-40k_ade20k-512x512.py'

pretrained = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_T_dw.pth.tar'  # noqa
model = dict(backbone=dict(arch='t-dw', init_cfg=dict(checkpoint=pretrained)))
