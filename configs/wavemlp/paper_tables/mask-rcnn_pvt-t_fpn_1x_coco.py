# Mask R-CNN 1x + PVT-tiny (PVT v1): the PVT-Tiny comparison row of Wave-MLP Table 3 (32.9M / 208.1G, AP box
# 36.7, AP mask 35.1, reported; PVT's own figures).
# Detector and recipe: the table's Wave-MLP Mask R-CNN 1x (../mask-rcnn_wavemlp-t_fpn_1x_coco.py: mmdet's
# mask-rcnn_r50_fpn_1x_coco with AdamW lr 1e-4, wd 1e-4, 12 epochs, steps at 8 and 11, 500-iteration warm-up,
# 1333x800, 8 GPUs x 2 images), which is PVT v1's own Mask R-CNN 1x recipe; only the backbone differs.
# Backbone: exactly the dense PVT v1 of our RetinaNet rows (../../cpvt/paper_tables/retinanet_pvt-t_fpn_1x_coco.py:
# learnable position tables, no PEG, drop path 0.2 as CPVT's controlled settings; PVT's own detection code
# used 0.1 for tiny/small and 0 for medium/large, an assumption we keep for like-for-like PVT rows).
# Checkpoint: the official pvt_tiny.pth (github.com/whai362/PVT), downloaded by URL
# and converted on load.
# The other PVT sizes inherit this config.
_base_ = '../mask-rcnn_wavemlp-t_fpn_1x_coco.py'

pretrained = 'https://github.com/whai362/PVT/releases/download/v2/pvt_tiny.pth'  # noqa
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PVTPEG',
        arch='tiny',
        out_indices=(0, 1, 2, 3),
        pos_embed_type='learnable',
        peg_after_block=None,
        drop_path_rate=0.2,
        init_cfg=dict(
            type='Pretrained',
            checkpoint=pretrained,
            prefix=None,  # the official file: PVT v1 keys at the top level
            # the classifier's final norm and its class token: a dense backbone has neither (as in the
            # official dense PVT v1 and mmdet); the class-token slot of the stage-4 position table is
            # dropped with it (logged), as mmdet's pvt_convert does
            ignore_keys=['norm3.*', 'cls_token'])),
    neck=dict(in_channels=[64, 128, 320, 512]))
