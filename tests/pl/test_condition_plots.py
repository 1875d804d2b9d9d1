"""``pl.condition_fates`` draws every sample's fate shares from the stored comparison alone."""


import matplotlib.pyplot as plt
import numpy as np
import pytest

import scskeleton as sks
from scskeleton._testing import conditions_with_fates, longest_lineage


@pytest.fixture(scope="module")
def compared():
    adata = conditions_with_fates(5, fate_shift=0.2, sample_sd=0.2)
    sks.tl.condition_fates(adata, "rpg", condition="condition", sample="sample")
    return adata


def test_one_bar_per_sample_stacked_to_one_with_the_p_values_in_the_legend(compared):
    before = compared.copy()
    ax = sks.pl.condition_fates(compared, "rpg_condition_fates", show=False)
    result = compared.uns["rpg_condition_fates"]
    n_units, n_fates = result["unit_shares"].shape
    bars = [patch for container in ax.containers for patch in container]
    assert len(bars) == n_units * n_fates
    tops = {}
    for patch in bars:
        x = round(patch.get_x(), 6)
        tops[x] = max(tops.get(x, 0.0), patch.get_y() + patch.get_height())
    assert all(abs(top - 1.0) < 1e-9 for top in tops.values())
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert all(label.startswith(fate) and "p = " in label for label, fate in zip(labels, result["fates"]))
    assert [t.get_text() for t in ax.get_xticklabels()] == list(result["units"])
    assert {t.get_text() for t in ax.texts} >= {"control", "treated"}
    assert compared.uns.keys() == before.uns.keys() and compared.obs.equals(before.obs)
    plt.close("all")


def test_a_missing_result_names_the_ones_present(compared):
    with pytest.raises(KeyError, match="rpg_condition_fates"):
        sks.pl.condition_fates(compared, "rpg", show=False)


@pytest.fixture(scope="module")
def paced():
    adata = conditions_with_fates(102, delay=0.2, sample_sd=0.2)
    sks.tl.condition_progression(adata, "rpg", condition="condition", sample="sample")
    return adata


def test_one_panel_per_lineage_with_a_density_per_condition_and_per_sample(paced):
    before = paced.copy()
    result = paced.uns["rpg_condition_progression"]
    panels = sks.pl.condition_progression(paced, "rpg_condition_progression", show=False)
    assert len(panels) == len(result["lineages"])
    for panel, lineage in zip(panels, result["lineages"]):
        lines = panel.get_lines()
        assert len(lines) == 2 * (1 + 3)  # each condition, then each of its three samples
        x = lines[0].get_xdata()
        for line in lines:  # densities: one unit of area, less what the kernels spill past the ends of the grid
            assert 0.8 < np.trapezoid(line.get_ydata(), x) < 1.01
        assert panel.get_title().startswith(f"{lineage} (p")
    assert [t.get_text() for t in panels[-1].get_legend().get_texts()] == ["control", "treated"]
    assert paced.uns.keys() == before.uns.keys() and paced.obs.equals(before.obs)
    plt.close("all")


@pytest.fixture(scope="module")
def curved():
    adata = conditions_with_fates(3, n_cells=1500, n_genes=120, n_fates=2, samples_per_condition=4,
                                  condition_genes=0.2, sample_expression_sd=0.1)
    sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample", lineage=longest_lineage(adata))
    return adata


def test_one_panel_per_gene_with_a_curve_per_condition_from_the_stored_result(curved):
    before = curved.copy()
    genes = list(curved.var.sort_values("rpg_condition_test_pval").index[:2])
    panels = sks.pl.condition_curves(curved, "rpg_condition_test", genes, show=False)
    curves = curved.varm["rpg_condition_test_curves"]
    for panel, gene in zip(panels, genes):
        lines = [line for line in panel.get_lines() if line.get_linestyle() == "-"]
        assert [line.get_label() for line in lines] == ["control", "treated"]
        column = curved.var_names.get_loc(gene)
        np.testing.assert_array_equal(lines[1].get_ydata(), curves[column, 1])
        assert len([line for line in panel.get_lines() if line.get_linestyle() == ":"]) == 2  # the covered stretch
        assert panel.get_title().startswith(gene) and "p = " in panel.get_title()
        assert len(panel.collections) == 2  # the cells of each condition
    assert curved.uns.keys() == before.uns.keys() and curved.var.equals(before.var)
    plt.close("all")
    with pytest.raises(KeyError, match="rpg_condition_test"):
        sks.pl.condition_curves(curved, "rpg", genes, show=False)
