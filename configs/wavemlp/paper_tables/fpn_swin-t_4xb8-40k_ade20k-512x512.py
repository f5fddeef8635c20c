# Semantic FPN + Swin-T on ADE20K: the row of Wave-MLP Table 4 printed as "Swin-S†" (31.9M / 182G, 41.5 mIoU,
# reported; "results are from GFNet"). These are GFNet's Swin-Ti figures: this model measures 31.89M, a Swin-S
# one 53.21M (= the row printed as "Swin-B†", ./fpn_swin-s_4xb8-40k_ade20k-512x512.py).
# Model and recipe of ./fpn_swin-s_4xb8-40k_ade20k-512x512.py (mmseg's Semantic FPN on mmseg's SwinTransformer,
# trained like the table's Wave-MLP rows) with mmseg's Swin-T settings (depths 2/2/6/2 and the checkpoint of its
# swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py).
_base_ = './fpn_swin-s_4xb8-40k_ade20k-512x512.py'

checkpoint_file = 'https://download.openmmlab.com/mmsegmentation/v0.5/pretrain/swin/swin_tiny_patch4_window7_224_20220317-1cdeb081.pth'  # noqa
model = dict(backbone=dict(depths=[2, 2, 6, 2], init_cfg=dict(checkpoint=checkpoint_file)))
