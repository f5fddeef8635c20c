# Semantic FPN with Wave-MLP-M on ADE20K; paper Table 4 (reported): 43.3M / 231G, 46.8 mIoU
# (FLOPs at 2048x512). Recipe (paper Sec. 4.3, PVT): 40k iterations, batch 32 (4 GPUs x 8),
# AdamW lr 1e-4 wd 1e-4, poly decay power 0.9, 512x512 random crops, test shorter side 512.
# Channel-FC phase estimation of the released ImageNet models (loads the official
# weights); 1.6-8M more params than paper Tables 3-4 (see README).
# Backbone: the official WaveMLP_M weights, downloaded by URL (once, into torch's hub cache) and converted on load.
# The segmentor and recipe of fpn_wavemlp-s_4xb8-40k_ade20k-512x512.py; only the backbone differs.
_base_ = './fpn_wavemlp-s_4xb8-40k_ade20k-512x512.py'

pretrained = 'https://github.com/huawei-noah/CV-Backbones/releases/download/wavemlp/WaveMLP_M.pth.tar'  # noqa
model = dict(backbone=dict(arch='m', init_cfg=dict(checkpoint=pretrained)))
