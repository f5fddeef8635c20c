"""Write ``configs/<family>/paper_tables/metafile.yml`` for the paper-table configs: one data row per config
(:data:`ROWS`: the paper's table and row, its reported metrics, params and FLOPs), everything else derived.

Derived: ``Batch Size``, ``Epochs``/``Iterations``, ``Training Resources`` and ``Training Techniques`` from
the config (``.dev_scripts/metafile_rules.py``, the rules the metafile tests check), ``Parameters`` and
``FLOPs`` from ``docs/model_zoo.md`` (``tools/analysis/complexity.py``), the collection (paper, code,
architecture) from the family's own ``configs/<family>/metafile.yml``. The papers' figures are written as
``# reported`` (metrics) and ``Paper Parameters`` / ``Paper FLOPs``.

A new paper-table config ``configs/<family>/paper_tables/<name>.py``:

    python tools/analysis/complexity.py --configs configs/<family>/paper_tables --pattern '<name>.py' --merge
    # add one row to ROWS below, then
    python tools/misc/paper_table_metafiles.py
"""
import argparse
import glob
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, ROOT)

_P, _C, _W, _V = 'PosMLP paper', 'CPVT paper', 'Wave-MLP paper', 'PosMLP-Video paper'
_HALF = ' (trained on half of ImageNet-1k, the paper\'s ImageNet1K^0.5)'
_T2 = ' (direct evaluation at {} of the 224x224 model, no fine-tuning)'



def _metafile_rules():
    """``.dev_scripts/metafile_rules.py``: batch size, epochs and techniques derived from a config."""
    import importlib.util
    spec = importlib.util.spec_from_file_location('metafile_rules', osp.join(ROOT, '.dev_scripts', 'metafile_rules.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def top1(v):
    return {'Top 1 Accuracy': v}


def ap(box, mask):
    return {'box AP': box, 'mask AP': mask}


# config name -> (paper table / row, reported metrics ({} where the paper gives none legibly),
#                 paper params (M) or None, paper GFLOPs or None)
ROWS = {
    # PosMLP (Wang et al., ACM MM 2022)
    'posmlp-t_8xb120_in1k-384px': (f'{_P} Table 2, PosMLP-T at 384x384', top1(83.0), 21, 17.7),
    'posmlp-t_8xb120_in1k-half': (f'{_P} Tables 1, 3-7, default PosMLP-T{_HALF}', top1(77.40), 20.9, 5.21),
    'posmlp-t-sgu_8xb120_in1k-half': (f'{_P} Table 1, SGU (= Table 3 gMLP+ConvLHS){_HALF}', top1(76.33), 21.8, 5.10),
    'posmlp-t-lrpe-m_8xb120_in1k-half': (f'{_P} Table 1, PoSGU LRPE-M{_HALF}', top1(76.95), None, None),
    'posmlp-t-lrpe_8xb120_in1k-half': (f'{_P} Table 1, PoSGU LRPE{_HALF}', top1(76.93), None, None),
    'posmlp-t-glrpe_8xb120_in1k-half': (f'{_P} Table 1, PoSGU GLRPE{_HALF}', top1(77.41), None, None),
    'posmlp-t-g1-1-1-1_8xb120_in1k-half': (f'{_P} Table 4, s = (1, 1, 1, 1){_HALF}', top1(76.70), None, None),
    'posmlp-t-g4-4-4-4_8xb120_in1k-half': (f'{_P} Table 4, s = (4, 4, 4, 4){_HALF}', top1(76.87), None, None),
    'posmlp-t-g4-8-16-32_8xb120_in1k-half': (f'{_P} Table 4, s = (4, 8, 16, 32){_HALF}', top1(77.10), None, None),
    'posmlp-t-g32-32-32-32_8xb120_in1k-half': (f'{_P} Table 4, s = (32, 32, 32, 32){_HALF}', top1(77.02),
                                               None, None),
    'posmlp-t-w28_8xb120_in1k-half': (f'{_P} Table 5, window 28x28 in stage 1{_HALF}', top1(77.81), 20.8, 5.95),
    'posmlp-t-w7_8xb120_in1k-half': (f'{_P} Table 5, window 7x7 in stage 1{_HALF}', top1(76.98), 20.8, 5.01),
    'posmlp-t-sigma-alpha-i_8xb120_in1k-half': (f'{_P} Table 6, Sigma = alpha I{_HALF}', top1(76.49), None, None),
    'posmlp-t-sigma-gamma_8xb120_in1k-half': (f'{_P} Table 6, Sigma = Gamma{_HALF}', top1(77.61), None, None),
    'posmlp-t-frozen-delta_8xb120_in1k-half': (f'{_P} Table 6, Gamma Gamma^T with Delta frozen{_HALF}',
                                               top1(77.20), None, None),
    'posmlp-t-no-bias_8xb120_in1k-half': (f'{_P} Table 7, no b, no APE{_HALF}', top1(76.8), None, None),
    'posmlp-t-no-bias-ape_8xb120_in1k-half': (f'{_P} Table 7, no b, APE{_HALF}', top1(77.3), None, None),
    'posmlp-t-ape_8xb120_in1k-half': (f'{_P} Table 7, b and APE{_HALF}', top1(77.3), None, None),
    'gmlp-s_8xb120_in1k-half': (f'{_P} Table 1, gMLP SGU (= Table 3 gMLP (original), Table 10 Original: 72.18)'
                                f'{_HALF}', top1(72.14), 19.4, 4.42),
    'gmlp-s-lrpe-m_8xb120_in1k-half': (f'{_P} Table 1, gMLP PoSGU LRPE-M{_HALF}', top1(73.96), None, None),
    'gmlp-s-lrpe_8xb120_in1k-half': (f'{_P} Table 1, gMLP PoSGU LRPE{_HALF}', top1(72.44), None, None),
    'gmlp-s-glrpe_8xb120_in1k-half': (f'{_P} Table 1, gMLP PoSGU GLRPE{_HALF}', top1(74.56), None, None),
    'gmlp-s-ggqpe_8xb120_in1k-half': (f'{_P} Table 1, gMLP PoSGU GGQPE (= Table 3 gMLP+GGQPE){_HALF}',
                                      top1(74.02), 18.2, 4.45),
    'mask-rcnn_posmlp-t-no-bias_1x_coco': (f'{_P} Table 9, no b, no APE', ap(41.6, 38.3), None, None),
    'mask-rcnn_posmlp-t-no-bias-ape_1x_coco': (f'{_P} Table 9, no b, APE', ap(41.6, 38.4), None, None),
    'mask-rcnn_posmlp-t-ape_1x_coco': (f'{_P} Table 9, b and APE', ap(41.7, 38.4), None, None),
    'posmlp-t-sgu-linear-pe-pm_8xb120_in1k-half': (f'{_P} Table 10, hierarchical gMLP (SGU), PE Linear, PM Linear'
                                                   f'{_HALF}', top1(74.68), 23.3, 5.10),
    'posmlp-t-sgu-linear-pm_8xb120_in1k-half': (f'{_P} Table 10, hierarchical gMLP (SGU), PE Conv, PM Linear{_HALF}',
                                                top1(75.43), 23.3, 5.27),
    'posmlp-t-sgu-linear-pe_8xb120_in1k-half': (f'{_P} Table 10, hierarchical gMLP (SGU), PE Linear, PM Conv{_HALF}',
                                                top1(75.81), 21.8, 4.93),
    'posmlp-t-posgu-add_8xb120_in1k-half': (f'{_P} Fig. 3(b), PoSGU with element-wise addition (no figure in the text)'
                                            f'{_HALF}', {}, None, None),
    'posmlp-t-posgu-concat_8xb120_in1k-half': (f'{_P} Fig. 3(c), PoSGU with concatenation (no figure in the text)'
                                               f'{_HALF}', {}, None, None),
    'posmlp-t-posgu-ln_8xb120_in1k-half': (f'{_P} Fig. 3(d), LayerNorm before GGQPE{_HALF}', top1(76.95), None, None),
    'posmlp-t-posgu-nonsplit_8xb120_in1k-half': (f'{_P} Fig. 3(e), NonSplit PoSGU{_HALF}', top1(75.49), None, None),
    'gmlp-s_8xb120_in1k': (f'{_P} Table 2, gMLP-S (from the gMLP paper; rounded there, Table 3 prints 19.4M / 4.42G)',
                           top1(79.6), 20, 4.5),
    'gmlp-b_8xb120_in1k': (f'{_P} Table 2, gMLP-B (from the gMLP paper)', top1(81.6), 73, 15.8),
    # CPVT (Chu et al., ICLR 2023)
    'cpvt-ti-peg0-1_8xb128_in1k': (f'{_C} Table 12, 0-1 tiny (= Table 6 position 0, Table 14 dw 3x3)', top1(72.4),
                                   5.7, None),
    'cpvt-ti-peg0-11_8xb128_in1k': (f'{_C} Table 12, 0-11 tiny', top1(73.4), 6.1, None),
    'cpvt-s-peg0-1_8xb128_in1k': (f'{_C} Table 12, 0-1 small', top1(79.9), 22.0, None),
    'cpvt-s-peg0-11_8xb128_in1k': (f'{_C} Table 12, 0-11 small', top1(80.6), 23.8, None),
    'cpvt-ti-posnone_8xb128_in1k': (f'{_C} Table 6, no PEG (no position encoding)', top1(68.2), None, None),
    'deit-ti-convproj_8xb128_in1k': (f'{_C} Table 16, DeiT-tiny + CvT convolutional projection at position 0',
                                     top1(70.6), 5.685352, None),
    'cpvt-ti-posm1_8xb128_in1k': (f'{_C} Table 6, position -1', top1(70.6), 5.7, None),
    'cpvt-ti-pos3_8xb128_in1k': (f'{_C} Table 6, position 3', top1(72.3), None, None),
    'cpvt-ti-pos6_8xb128_in1k': (f'{_C} Table 6, position 6', top1(71.7), None, None),
    'cpvt-ti-pos10_8xb128_in1k': (f'{_C} Table 6, position 10', top1(69.0), None, None),
    'cpvt-ti-posm1-k27_8xb128_in1k': (f'{_C} Table 6, position -1 with a 27x27 PEG', top1(72.5), 5.8, None),
    'cpvt-ti-peg0-1-k7_8xb128_in1k': (f'{_C} Table 14, depthwise 7x7', top1(72.5), None, None),
    'cpvt-ti-peg0-1-dw3-bn-relu-x4_8xb128_in1k': (f'{_C} Table 14, 4 x (depthwise 3x3 + BN + ReLU)', top1(72.4),
                                                  None, None),
    'cpvt-ti-peg0-1-dense3_8xb128_in1k': (f'{_C} Table 14, dense 3x3', top1(72.3), None, None),
    'cpvt-ti-peg0-1-dense3-bn-relu-x4_8xb128_in1k': (f'{_C} Table 14, 4 x (dense 3x3 + BN + ReLU)', top1(72.5),
                                                     None, None),
    'cpvt-ti-peg0-1_8xb128_in1k-160px': (f'{_C} Table 2, CPVT-Ti (PEG 0-1){_T2.format("160x160")}', top1(66.8),
                                         6, None),
    'cpvt-ti-peg0-1_8xb128_in1k-384px': (f'{_C} Table 2, CPVT-Ti (PEG 0-1){_T2.format("384x384")}', top1(73.2),
                                         6, None),
    'cpvt-ti-peg0-1_8xb128_in1k-448px': (f'{_C} Table 2, CPVT-Ti (PEG 0-1){_T2.format("448x448")}', top1(71.8),
                                         6, None),
    'cpvt-ti-peg0-1_8xb128_in1k-512px': (f'{_C} Table 2, CPVT-Ti (PEG 0-1){_T2.format("512x512")}', top1(70.3),
                                         6, None),
    'cpvt-ti_8xb128_in1k-160px': (f'{_C} Table 2, CPVT-Ti (PEG 0-5){_T2.format("160x160")}', top1(67.7), 6, None),
    'cpvt-ti_8xb128_in1k-384px': (f'{_C} Table 2, CPVT-Ti (PEG 0-5){_T2.format("384x384")}', top1(74.2), 6, None),
    'cpvt-ti_8xb128_in1k-448px': (f'{_C} Table 2, CPVT-Ti (PEG 0-5){_T2.format("448x448")}', top1(72.6), 6, None),
    'cpvt-ti_8xb128_in1k-512px': (f'{_C} Table 2, CPVT-Ti (PEG 0-5){_T2.format("512x512")}', top1(70.8), 6, None),
    'cpvt-s-peg0-1_8xb128_in1k-160px': (f'{_C} Table 2, CPVT-S (PEG 0-1){_T2.format("160x160")}', top1(76.1),
                                        22, None),
    'cpvt-s-peg0-1_8xb128_in1k-384px': (f'{_C} Table 2, CPVT-S (PEG 0-1){_T2.format("384x384")}', top1(80.4),
                                        22, None),
    'cpvt-s-peg0-1_8xb128_in1k-448px': (f'{_C} Table 2, CPVT-S (PEG 0-1){_T2.format("448x448")}', top1(78.6),
                                        22, None),
    'cpvt-s-peg0-1_8xb128_in1k-512px': (f'{_C} Table 2, CPVT-S (PEG 0-1){_T2.format("512x512")}', top1(76.8),
                                        22, None),
    'cpvt-b-peg0-1_8xb128_in1k': (f'{_C} Table 2, CPVT-B (PEG 0-1) at 224x224', top1(81.9), 86, None),
    'cpvt-b-peg0-1_8xb128_in1k-160px': (f'{_C} Table 2, CPVT-B (PEG 0-1){_T2.format("160x160")}', top1(80.5),
                                        86, None),
    'cpvt-b-peg0-1_8xb128_in1k-384px': (f'{_C} Table 2, CPVT-B (PEG 0-1){_T2.format("384x384")}', top1(82.3),
                                        86, None),
    'cpvt-b-peg0-1_8xb128_in1k-448px': (f'{_C} Table 2, CPVT-B (PEG 0-1){_T2.format("448x448")}', top1(82.4),
                                        86, None),
    'cpvt-b-peg0-1_8xb128_in1k-512px': (f'{_C} Table 2, CPVT-B (PEG 0-1){_T2.format("512x512")}', top1(81.0),
                                        86, None),
    'cpvt-ti-peg0-1-fixed-random_8xb128_in1k': (f'{_C} Table 5, 3x3 fixed (random init)', top1(71.3), 5.68, None),
    'cpvt-ti-peg0-1-fixed-learned_8xb128_in1k': (f'{_C} Table 5, 3x3 fixed (learned init)', top1(72.3), 5.68,
                                                 None),
    'cpvt-ti-peg0-1-1x1-x12_8xb128_in1k': (f'{_C} Table 5, 1x1 (12 x) learnable', top1(68.6), 6.13, None),
    'cpvt-ti-peg0-1-le_8xb128_in1k': (f'{_C} Table 7, CPVT-Ti 0-1 PEG + LE', top1(72.9), None, None),
    'cpvt-ti-peg0-1-x4-le_8xb128_in1k': (f'{_C} Table 7, CPVT-Ti 0-1 4 x PEG + LE', top1(72.9), None, None),
    'cpvt-ti-peg0-1-nopad_8xb128_in1k': (f'{_C} Table 11, CPVT-Ti without zero paddings', top1(70.5), None, None),
    'cpvt-s-peg0-1-nopad_8xb128_in1k': (f'{_C} B.3 text (Table 11 says CPVT-Ti), CPVT-S without zero paddings',
                                        top1(70.5), None, None),
    'cpvt-ti-posnone_8xb128_in1k-160px': (f'{_C} Table 2, DeiT-tiny (no pos){_T2.format("160x160")}', top1(62.1),
                                          6, None),
    'cpvt-ti-posnone_8xb128_in1k-384px': (f'{_C} Table 2 (= Table 1 at 384), DeiT-tiny (no pos)'
                                          f'{_T2.format("384x384")}', top1(68.6), 6, None),
    'cpvt-ti-posnone_8xb128_in1k-448px': (f'{_C} Table 2, DeiT-tiny (no pos){_T2.format("448x448")}', top1(68.4),
                                          6, None),
    'cpvt-ti-posnone_8xb128_in1k-512px': (f'{_C} Table 2, DeiT-tiny (no pos){_T2.format("512x512")}', top1(65.0),
                                          6, None),
    # DeiT baselines of the CPVT paper (other position encodings, GAP head)
    'deit-ti-le_8xb128_in1k': (f'{_C} Table 1 / Table 7, DeiT-tiny learnable (LE) (= Table 3 CLT, Table 2)',
                               top1(72.2), 6, None),
    'deit-ti-le_8xb128_in1k-160px': (f'{_C} Table 2, DeiT-tiny{_T2.format("160x160")}', top1(65.6), 6, None),
    'deit-ti-le_8xb128_in1k-384px': (f'{_C} Table 2 (= Table 1 at 384), DeiT-tiny{_T2.format("384x384")}',
                                     top1(71.2), 6, None),
    'deit-ti-le_8xb128_in1k-448px': (f'{_C} Table 2, DeiT-tiny{_T2.format("448x448")}', top1(68.8), 6, None),
    'deit-ti-le_8xb128_in1k-512px': (f'{_C} Table 2, DeiT-tiny{_T2.format("512x512")}', top1(65.9), 6, None),
    'deit-ti-sincos_8xb128_in1k': (f'{_C} Table 1 / Table 7, DeiT-tiny 2-D sin-cos (= Table 2 DeiT-tiny (sin))',
                                   top1(72.3), 6, None),
    'deit-ti-sincos_8xb128_in1k-160px': (f'{_C} Table 2, DeiT-tiny (sin){_T2.format("160x160")}', top1(65.2),
                                         6, None),
    'deit-ti-sincos_8xb128_in1k-384px': (f'{_C} Table 2 (= Table 1 at 384), DeiT-tiny (sin)'
                                         f'{_T2.format("384x384")}', top1(70.8), 6, None),
    'deit-ti-sincos_8xb128_in1k-448px': (f'{_C} Table 2, DeiT-tiny (sin){_T2.format("448x448")}', top1(68.2),
                                         6, None),
    'deit-ti-sincos_8xb128_in1k-512px': (f'{_C} Table 2, DeiT-tiny (sin){_T2.format("512x512")}', top1(65.1),
                                         6, None),
    'deit-ti-rpe_8xb128_in1k': (f'{_C} Table 1 / Table 7, DeiT-tiny 2-D RPE (Shaw et al., K = 8)', top1(70.5),
                                None, None),
    'deit-ti-rpe_8xb128_in1k-384px': (f'{_C} Table 1, DeiT-tiny 2-D RPE{_T2.format("384x384")}', top1(69.8),
                                      None, None),
    # Table 8 prints 40,011 positional parameters (LE + one shared RPE bias table), not the model's total
    'deit-ti-le-rpe_8xb128_in1k': (f'{_C} Table 8, DeiT-tiny (LE+RPE)', top1(72.4), None, None),
    'deit-ti-le-rpe_8xb128_in1k-160px': (f'{_C} Table 8, DeiT-tiny (LE+RPE){_T2.format("160x160")}', top1(65.6),
                                         None, None),
    'deit-ti-le-rpe_8xb128_in1k-384px': (f'{_C} Table 8, DeiT-tiny (LE+RPE){_T2.format("384x384")}', top1(70.8),
                                         None, None),
    'deit-ti-le-rpe_8xb128_in1k-448px': (f'{_C} Table 8, DeiT-tiny (LE+RPE){_T2.format("448x448")}', top1(68.4),
                                         None, None),
    'deit-ti-le-rpe_8xb128_in1k-512px': (f'{_C} Table 8, DeiT-tiny (LE+RPE){_T2.format("512x512")}', top1(65.6),
                                         None, None),
    'deit-ti-gap_8xb128_in1k': (f'{_C} Table 3, DeiT-tiny GAP', top1(72.6), 6, None),
    'deit-s-le_8xb128_in1k': (f'{_C} Table 3 CLT / Table 15, DeiT-small (= Table 2)', top1(79.9), 22, 4.6),
    'deit-s-le_8xb128_in1k-160px': (f'{_C} Table 2, DeiT-small{_T2.format("160x160")}', top1(75.6), 22, None),
    'deit-s-le_8xb128_in1k-384px': (f'{_C} Table 2, DeiT-small{_T2.format("384x384")}', top1(78.1), 22, None),
    'deit-s-le_8xb128_in1k-448px': (f'{_C} Table 2, DeiT-small{_T2.format("448x448")}', top1(75.9), 22, None),
    'deit-s-le_8xb128_in1k-512px': (f'{_C} Table 2, DeiT-small{_T2.format("512x512")}', top1(72.6), 22, None),
    'deit-s-gap_8xb128_in1k': (f'{_C} Table 3, DeiT-small GAP', top1(80.2), 22, None),
    'swin-t-peg-gap_16xb64_in1k': (f'{_C} Table 15, Swin-tiny+PEG+GAP (B.5)', top1(82.3), 29, 4.5),
    # Table 4's rows "trained with hard distillation using RegNetY-160 as the teacher" (DeiT's distillation token)
    'deit-ti-distilled_8xb128_in1k': (f'{_C} Table 4, DeiT-tiny (hard distillation, RegNetY-160 teacher)',
                                      top1(74.5), 6, None),
    'cpvt-ti-distilled_8xb128_in1k': (f'{_C} Table 4, CPVT-Ti (hard distillation, RegNetY-160 teacher)',
                                      top1(75.9), 6, None),
    # CPVT Table 13's PVT-tiny rows (PVT v1 options of PVTPEG; the +PEG+GAP row is configs/cpvt/pvt-peg-t-gap_*)
    'pvt-t_8xb128_in1k': (f'{_C} Table 13, PVT-tiny (PVT v1)', top1(75.0), 13, None),
    'pvt-peg-t-cls_8xb128_in1k': (f'{_C} Table 13, PVT-tiny+PEG (class token)', top1(77.3), 13, None),
    'pvt-t-gap_8xb128_in1k': (f'{_C} Table 13, PVT-tiny+GAP (position tables)', top1(75.9), 13, None),
    'fpn_pvt-t_4xb4-80k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, PVT-tiny', {'mIoU': 35.7}, 17, None),
    'fpn_pvt-peg-t-cls_4xb4-80k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, PVT-tiny+PEG', {'mIoU': 38.0}, 17,
                                                  None),
    'fpn_pvt-t-gap_4xb4-80k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, PVT-tiny+GAP', {'mIoU': 36.0}, 17, None),
    'retinanet_pvt-t_fpn_1x_coco': (f'{_C} Table 13, RetinaNet 1x, PVT-tiny', {'box AP': 36.7}, 23, None),
    'retinanet_pvt-t_fpn_ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, PVT-tiny', {'box AP': 39.4}, 23, None),
    'retinanet_pvt-peg-t-cls_fpn_1x_coco': (f'{_C} Table 13, RetinaNet 1x, PVT-tiny+PEG', {'box AP': 38.0}, 23, None),
    'retinanet_pvt-peg-t-cls_fpn_ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, PVT-tiny+PEG', {'box AP': 41.8},
                                               23, None),
    'retinanet_pvt-t-gap_fpn_1x_coco': (f'{_C} Table 13, RetinaNet 1x, PVT-tiny+GAP', {'box AP': 36.9}, 23, None),
    'retinanet_pvt-t-gap_fpn_ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, PVT-tiny+GAP', {'box AP': 39.7}, 23,
                                           None),
    'pvt-s_8xb128_in1k': (f'{_C} Table 13, PVT-small (PVT v1)', top1(79.8), 25, None),
    'pvt-m_8xb128_in1k': (f'{_C} Table 13, PVT-Medium (PVT v1)', top1(81.2), 44, None),
    'fpn_pvt-s_4xb4-80k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, PVT-small', {'mIoU': 39.8}, 28, None),
    'fpn_pvt-m_4xb4-80k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, PVT-Medium', {'mIoU': 41.6}, 48, None),
    'retinanet_pvt-s_fpn_1x_coco': (f'{_C} Table 13, RetinaNet 1x, PVT-small', {'box AP': 40.4}, 34, None),
    'retinanet_pvt-s_fpn_ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, PVT-small', {'box AP': 42.2}, 34, None),
    'retinanet_pvt-m_fpn_1x_coco': (f'{_C} Table 13, RetinaNet 1x, PVT-Medium', {'box AP': 41.9}, 54, None),
    'retinanet_pvt-m_fpn_ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, PVT-Medium', {'box AP': 43.2}, 54, None),
    # CPVT Table 13's ResNet-18 reference rows (the PVT paper's figures; upstream ResNet-18 configs)
    'resnet18_8xb32-90e_in1k': (f'{_C} Table 13, ResNet-18', top1(69.8), 12, None),
    'fpn_r18_8xb4-40k_ade20k-512x512': (f'{_C} Table 13, Semantic FPN, ResNet-18', {'mIoU': 32.9}, 16, None),
    'retinanet_r18_fpn_8xb2-1x_coco': (f'{_C} Table 13, RetinaNet 1x, ResNet-18', {'box AP': 31.8}, 21, None),
    'retinanet_r18_fpn_8xb2-ms-3x_coco': (f'{_C} Table 13, RetinaNet 3x + MS, ResNet-18', {'box AP': 35.4}, 21, None),
    # CPVT Table 2's DeiT-base row (224 = its training config, the other sizes evaluated without fine-tuning)
    'deit-b-le_8xb128_in1k': (f'{_C} Table 2, DeiT-base at 224x224', top1(81.8), 86, None),
    'deit-b-le_8xb128_in1k-160px': (f'{_C} Table 2, DeiT-base{_T2.format("160x160")}', top1(79.1), 86, None),
    'deit-b-le_8xb128_in1k-384px': (f'{_C} Table 2, DeiT-base{_T2.format("384x384")}', top1(79.7), 86, None),
    'deit-b-le_8xb128_in1k-448px': (f'{_C} Table 2, DeiT-base{_T2.format("448x448")}', top1(79.8), 86, None),
    'deit-b-le_8xb128_in1k-512px': (f'{_C} Table 2, DeiT-base{_T2.format("512x512")}', top1(78.2), 86, None),
    # CPVT experiments reported in the text only (no table; the paper gives no params or FLOPs for them)
    'cpvt-ti-peg-qk_8xb128_in1k': (f'{_C} Sec. 5.1 text (next to Table 5), DeiT-tiny with the PEG added only when '
                                   'calculating Q and K', top1(71.3), None, None),
    'deit-ti-le-0-5_8xb128_in1k': (f'{_C} Sec. 5.3 text (after Table 8), DeiT-tiny with LE at the beginning and in '
                                   'the next 5 layers', top1(72.7), None, None),
    # Wave-MLP (Tang et al., CVPR 2022)
    'wavemlp-t-dw-phase-none_8xb128_in1k': (f'{_W} Table 5, no phase (= Table 6 baseline), Wave-MLP-T*',
                                            top1(78.8), 15, 2.1),
    'wavemlp-t-dw-phase-static_8xb128_in1k': (f'{_W} Table 5, static phase, Wave-MLP-T*', top1(79.3), 15, 2.1),
    'wavemlp-t-dw-phase-identity_8xb128_in1k': (f'{_W} Table 6, identity phase, Wave-MLP-T*', top1(79.3), 15, 2.1),
    'wavemlp-t-dw-w3_8xb128_in1k': (f'{_W} Table 7, window 3, Wave-MLP-T*', top1(79.7), 15, 2.1),
    'wavemlp-t-dw-w5_8xb128_in1k': (f'{_W} Table 7, window 5, Wave-MLP-T*', top1(79.8), 15, 2.1),
    'wavemlp-t-dw-all_8xb128_in1k': (f'{_W} Table 7, "All" (token-FC over whole rows / columns at 224x224), '
                                     'Wave-MLP-T*', top1(80.0), 16, 2.3),
    # Table 9's params/FLOPs (25.3M / 196.3G ...) are the paper's and cannot hold a Mask R-CNN (family README)
    'mask-rcnn_wavemlp-t_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-T', ap(44.1, 40.1),
                                           25.3, 196.3),
    'mask-rcnn_wavemlp-s_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-S', ap(45.5, 41.0),
                                           37.1, 231.3),
    'mask-rcnn_wavemlp-m_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-M', ap(46.3, 41.5),
                                           49.4, 291.3),
    'mask-rcnn_wavemlp-t-dw_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-T (depthwise phase)',
                                              ap(44.1, 40.1), 25.3, 196.3),
    'mask-rcnn_wavemlp-s-dw_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-S (depthwise phase)',
                                              ap(45.5, 41.0), 37.1, 231.3),
    'mask-rcnn_wavemlp-m-dw_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, Wave-MLP-M (depthwise phase)',
                                              ap(46.3, 41.5), 49.4, 291.3),
    # Wave-MLP comparison rows (other papers' models, built from OpenMMLab components and our PVT v1); the paper's
    # detector FLOPs include the heads, ours count backbone + neck (docs/model_zoo.md)
    'pvt-l_8xb128_in1k': (f'{_W} Table 2, PVT-Large (PVT v1)', top1(81.7), 61, 9.8),
    'mask-rcnn_r18_fpn_1x_coco': (f'{_W} Table 3, Mask R-CNN 1x, ResNet18', ap(34.0, 31.2), 31.2, 207.3),
    'mask-rcnn_pvt-t_fpn_1x_coco': (f'{_W} Table 3, Mask R-CNN 1x, PVT-Tiny', ap(36.7, 35.1), 32.9, 208.1),
    'mask-rcnn_pvt-s_fpn_1x_coco': (f'{_W} Table 3 (= {_P} Table 8), Mask R-CNN 1x, PVT-Small', ap(40.4, 37.8),
                                    44.1, 245.1),
    'mask-rcnn_pvt-m_fpn_1x_coco': (f'{_W} Table 3 (= {_P} Table 8), Mask R-CNN 1x, PVT-Medium', ap(42.0, 39.0),
                                    63.9, 301.7),
    'mask-rcnn_pvt-l_fpn_1x_coco': (f'{_W} Table 3, Mask R-CNN 1x, PVT-Large', ap(42.9, 39.5), 81.0, 364.3),
    'retinanet_swin-s-p4-w7_fpn_1x_coco': (f'{_W} Table 3, RetinaNet 1x, Swin-S', {'box AP': 44.5}, 59.8, 334.8),
    'mask-rcnn_swin-s-p4-w7_fpn_1x_coco': (f'{_W} Table 3, Mask R-CNN 1x, Swin-S', ap(44.8, 40.9), 69.1, 353.8),
    'fpn_swin-t_4xb8-40k_ade20k-512x512': (f'{_W} Table 4, Semantic FPN, the row printed Swin-S (GFNet\'s Swin-Ti '
                                           'figures)', {'mIoU': 41.5}, 31.9, 182),
    'fpn_swin-s_4xb8-40k_ade20k-512x512': (f'{_W} Table 4, Semantic FPN, the row printed Swin-B (GFNet\'s Swin-S '
                                           'figures)', {'mIoU': 45.2}, 53.2, 274),
    'mask-rcnn_r18_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, ResNet18', ap(36.9, 33.6), 31.2, 207.3),
    'mask-rcnn_pvt-t_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, PVT-Tiny', ap(39.8, 37.4), 32.9, 208.1),
    'mask-rcnn_pvt-s_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, PVT-Small', ap(43.0, 39.9), 44.1, 245.1),
    'mask-rcnn_pvt-m_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, PVT-Medium', ap(44.2, 40.5), 63.9, 301.7),
    # Table 9 prints Table 3's RetinaNet figures for PVT-Large (71.1M / 345.7G), not its Mask R-CNN ones
    # (81.0M / 364.3G)
    'mask-rcnn_pvt-l_fpn_ms-3x_coco': (f'{_W} Table 9, Mask R-CNN 3x + MS, PVT-Large', ap(44.5, 40.7), 71.1, 345.7),
    # PosMLP-Video (Hao, Zhou et al., IJCV 2024); Table 4's body is not legible in our copy
    'posmlp-video-s-imagenet-pretrained_4xb8-u16-60e_sthv1-rgb-16x1x1': (
        f'{_V} Table 3, PoTGU+PoSGU (IN-1K), tested 16x1x1', top1(52.24), 13.51, 40.49),
    'posmlp-video-s-w8x14_4xb8-u8-60e_sthv1-rgb': (f'{_V} Table 5, 8x14x14 windows (stages 1-3), 8-frame clips',
                                                   top1(42.33), 13.50, 20.38),
    'posmlp-video-s-g1_4xb8-u16-60e_sthv1-rgb': (f'{_V} Table 4, g = (1, 1, 1, 1) (figures not legible)', {},
                                                 None, None),
    'posmlp-video-s-g12-24-48-96_4xb8-u16-60e_sthv1-rgb': (f'{_V} Table 4, g = (12, 24, 48, 96) (figures not '
                                                           'legible)', {}, None, None),
}

TASKS = {'mmpretrain': ('Image Classification', 'ImageNet-1k'), 'mmdet': ('Object Detection', 'COCO'),
         'mmseg': ('Semantic Segmentation', 'ADE20K'), 'mmaction': ('Action Recognition', None)}
VIDEO_DATASETS = {'sthv1': 'SthV1', 'sthv2': 'SthV2', 'kinetics400': 'Kinetics-400', 'diving48': 'Diving48'}


def paper_table_configs(root=ROOT) -> list:
    return sorted(osp.relpath(p, root) for p in glob.glob(osp.join(root, 'configs', '*', 'paper_tables', '*.py')))


def _dataset(scope, stem):
    task, dataset = TASKS[scope]
    if dataset is None:
        dataset = next((v for k, v in VIDEO_DATASETS.items() if k in stem), None)
        if dataset is None:
            raise ValueError(f'{stem}: no video dataset in the name; add it to VIDEO_DATASETS.')
    return task, dataset


def _scalar(v):
    if isinstance(v, str):
        return f"'{v}'" if any(c in v for c in ':#{}[],&*?|<>=!%@`\'"') or v != v.strip() else v
    return str(v)


def model_entry(cfg_rel: str, collection: str, zoo: dict) -> list:
    """The metafile lines of one paper-table config."""
    from mmengine.config import Config

    derived_metadata = _metafile_rules().derived_metadata
    stem = osp.splitext(osp.basename(cfg_rel))[0]
    if stem not in ROWS:
        raise KeyError(f'{cfg_rel} has no row in ROWS of {osp.relpath(__file__, ROOT)}: add one '
                       '(paper table, metrics, paper params, paper GFLOPs).')
    if stem not in zoo:
        raise KeyError(f'{stem} is not in docs/model_zoo.md: run python tools/analysis/complexity.py --configs '
                       f'{osp.dirname(cfg_rel)} --pattern {osp.basename(cfg_rel)} --merge')
    source, metrics, paper_params, paper_gflops = ROWS[stem]
    cfg = Config.fromfile(osp.join(ROOT, cfg_rel))
    scope = cfg.get('default_scope', 'mmpretrain')
    task, dataset = _dataset(scope, stem)
    md = derived_metadata(cfg_rel, cfg)
    params_m, gflops = zoo[stem]
    train_data = dataset + (' (half)' if stem.endswith('-half') else '')
    lines = [f'  - Name: {stem}', f'    In Collection: {collection}', '    Metadata:',
             f'      Training Data: {_scalar(train_data)}',
             f"      Batch Size: {md['Batch Size']}"]
    lines += [f'      {k}: {md[k]}' for k in ('Epochs', 'Iterations') if k in md]
    lines += [f"      Training Resources: {md['Training Resources']}",
              f"      Training Techniques: [{', '.join(sorted(md['Training Techniques']))}]",
              f'      Parameters: {int(round(params_m * 1e6))}  # measured (docs/model_zoo.md)']
    if gflops is not None:
        lines.append(f'      FLOPs: {int(round(gflops * 1e9))}  # measured (docs/model_zoo.md)')
    if paper_params is not None:
        lines.append(f'      Paper Parameters: {int(round(paper_params * 1e6))}  # reported ({source})')
    if paper_gflops is not None:
        lines.append(f'      Paper FLOPs: {int(round(paper_gflops * 1e9))}  # reported ({source})')
    lines.append('    Results:')
    groups = [(task, {k: v for k, v in metrics.items() if k != 'mask AP'})]
    if 'mask AP' in metrics:
        groups.append(('Instance Segmentation', {'mask AP': metrics['mask AP']}))
    for t, ms in groups:
        lines += [f'      - Task: {t}', f'        Dataset: {dataset}']
        if ms:
            lines.append('        Metrics:')
            # as the paper prints them: 38.0 stays 38.0
            lines += [f'          {k}: {v}  # reported ({source})' for k, v in ms.items()]
        else:
            lines.append(f'        Metrics: {{}}  # {source}')
    lines += [f'    Config: {cfg_rel}', '    Weights: null']
    return lines


def collection_lines(family: str) -> tuple:
    """The paper-table collection of a family: the family metafile's first collection, renamed."""
    import yaml
    with open(osp.join(ROOT, 'configs', family, 'metafile.yml')) as f:
        coll = yaml.safe_load(f)['Collections'][0]
    name = f"{coll['Name']} (paper tables)"
    text = yaml.safe_dump({'Collections': [dict(coll, Name=name, README=f'configs/{family}/README.md')]},
                          sort_keys=False, allow_unicode=True, width=118)
    out = [text.rstrip('\n').replace('\n- ', '\n  - ').replace('\n  ', '\n    ').replace('\n    - Name', '\n  - Name')]
    return name, out


def write_metafiles(root=ROOT, check=False) -> list:
    """Write (or with ``check``, only compare) the paper-table metafiles; returns the files written (or, with
    ``check``, those whose content differs from what the rows give)."""
    zoo_rows = _metafile_rules().zoo_rows
    zoo = zoo_rows(osp.join(root, 'docs', 'model_zoo.md'))
    by_family = {}
    for cfg in paper_table_configs(root):
        by_family.setdefault(cfg.split(osp.sep)[1], []).append(cfg)
    unused = sorted(set(ROWS) - {osp.splitext(osp.basename(c))[0] for cs in by_family.values() for c in cs})
    if unused:
        raise KeyError(f'ROWS names configs that do not exist under configs/*/paper_tables/: {unused}')
    out = []
    for family, cfgs in sorted(by_family.items()):
        name, lines = collection_lines(family)
        lines = [HEADER] + lines + ['', 'Models:']
        for cfg in cfgs:
            lines += model_entry(cfg, name, zoo)
        text = '\n'.join(lines) + '\n'
        path = osp.join(root, 'configs', family, 'paper_tables', 'metafile.yml')
        if check:
            old = open(path).read() if osp.isfile(path) else None
            if old != text:
                out.append(osp.relpath(path, root))
            continue
        with open(path, 'w') as f:
            f.write(text)
        out.append(osp.relpath(path, root))
    return out


HEADER = ('# generated by tools/misc/paper_table_metafiles.py from its ROWS table: edit the row there, not this '
          'file')


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--check', action='store_true', help='write nothing; exit 1 when a metafile is out of date')
    args = p.parse_args(argv)
    paths = write_metafiles(check=args.check)
    if args.check:
        for path in paths:
            print(f'{path} is out of date: run python tools/misc/paper_table_metafiles.py')
        return 1 if paths else 0
    for path in paths:
        print('wrote', path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
