package carbon

import (
	"fmt"

	"github.com/gpumarket/gpumarket/services/hardware"
)

// Embodied carbon is an optional line of a carbon report: the emissions of making a board,
// spread over its life and charged to the time a customer's requests kept it busy. No GPU
// vendor publishes a cradle-to-gate figure per consumer card, so the per-board figures below
// are assumptions, named as such wherever they are shown (docs/methodology.md, "Embodied").
const (
	// EmbodiedConsumerKg is a consumer card's manufacturing emissions: the EcoDiag estimate for
	// a powerful graphics card (CNRS EcoInfo, 60 kgCO2e, with a 4-year life).
	EmbodiedConsumerKg     = 60.0
	EmbodiedConsumerSource = "EcoDiag (CNRS EcoInfo) estimate for a powerful graphics card, 60 kgCO2e, 2022"
	// EmbodiedEnterpriseKg is an enterprise card's, with its share of the server around it:
	// Chien et al.'s estimate for an A100 in an 8-GPU instance (HotCarbon 2023), 318 kgCO2e.
	EmbodiedEnterpriseKg     = 318.0
	EmbodiedEnterpriseSource = "Chien et al., Reducing the Carbon Impact of Generative AI Inference, HotCarbon 2023: 318 kgCO2e per A100 with its server share"
	// EmbodiedLifetimeYears is the life a board's emissions are spread over, busy or not.
	EmbodiedLifetimeYears = 4.0
)

// embodiedLifetimeMs is EmbodiedLifetimeYears in milliseconds (365.25-day years).
const embodiedLifetimeMs = EmbodiedLifetimeYears * 365.25 * 24 * 3600 * 1000

// EmbodiedKgPerBoard is the assumed manufacturing emissions of one board of a GPU model:
// enterprise or consumer by its class; a model the hardware list does not know is taken as
// consumer.
func EmbodiedKgPerBoard(sku string) float64 {
	if g, ok := hardware.GPUBySKU(sku); ok && g.Class == "enterprise" {
		return EmbodiedEnterpriseKg
	}
	return EmbodiedConsumerKg
}

// EmbodiedGCO2e is the embodied emissions charged to busyMs milliseconds of requests on a
// rig of gpuCount boards of a model: each board's emissions times the share of its life the
// requests took. busyMs is the sum of the requests' durations, so requests served side by
// side on the same boards are each charged their whole time: an upper bound.
func EmbodiedGCO2e(sku string, gpuCount int, busyMs float64) float64 {
	return EmbodiedKgPerBoard(sku) * 1000 * float64(gpuCount) * busyMs / embodiedLifetimeMs
}

// EmbodiedAssumptions are the embodied line's assumptions, in words.
func EmbodiedAssumptions() []string {
	return []string{
		fmt.Sprintf("A consumer card's manufacture: %.0f kgCO2e (assumption: %s).", EmbodiedConsumerKg, EmbodiedConsumerSource),
		fmt.Sprintf("An enterprise card's manufacture with its share of the server: %.0f kgCO2e (assumption: %s).", EmbodiedEnterpriseKg, EmbodiedEnterpriseSource),
		fmt.Sprintf("Each board's emissions are spread over a %.0f-year life, busy or idle.", EmbodiedLifetimeYears),
		"A request is charged its share of that life for its whole duration on every board of its rig; requests served side by side are each charged in full, so the figure is an upper bound.",
	}
}
