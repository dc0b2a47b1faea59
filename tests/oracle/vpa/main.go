// Command vpa-oracle drives the upstream VPA recommender (k8s.io/autoscaler/vertical-pod-autoscaler
// v1.8.1) over a JSON stream of samples, as pkg/recommender/routines/recommender.go drives it, and
// prints its recommendation at each run: the reference that tests/oracle/test_vpa_oracle.py holds
// tandem's own VPA (scaling.recommend.vpa, through scaling.own) to.
//
// Input, one JSON object a line (tests/oracle/vpa_streams.py writes them):
//
//	{"vpa": {"resourcePolicy": {...}}}                         first line: the VPA's spec.resourcePolicy
//	{"ts": T, "pods": [{"name": "web-1", "containers": ["app"]}]}  the workload's pods now (all of them)
//	{"ts": T, "samples": [{"pod", "container", "cpu", "memory", "oom"}]}  one metric event
//	{"ts": T, "run": true}                                     a recommender run
//
// Times are whole seconds.  cpu is cores (a float, whole nanocores), memory bytes; a sample with
// "oom": true is an OOM kill whose memory is the request (RecordOOM).  Output, a line per run:
//
//	{"ts": T, "recs": {"app": {"target": [millicores, bytes], "lower": [...], "upper": [...], "uncapped": [...]}}}
//
// with -1 for a resource that is not in the recommendation.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	vpa_types "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender/logic"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender/model"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender/routines"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
)

type sample struct {
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	CPU       *float64 `json:"cpu"`
	Memory    *int64   `json:"memory"`
	OOM       bool     `json:"oom"`
}

type pod struct {
	Name       string   `json:"name"`
	Containers []string `json:"containers"`
}

type event struct {
	VPA *struct {
		ResourcePolicy *vpa_types.PodResourcePolicy `json:"resourcePolicy"`
	} `json:"vpa"`
	TS      *int64   `json:"ts"`
	Pods    *[]pod   `json:"pods"`
	Samples []sample `json:"samples"`
	Run     bool     `json:"run"`
}

// existing is the controller fetcher of a workload that exists: every pod under the VPA is
// contributive (cluster.go getContributiveAggregateStateKeys), as for a live Deployment.
type existing struct{}

func (existing) FindTopMostWellKnownOrScalable(_ context.Context, c *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	return c, nil
}

const namespace = "shop"

var podLabels = labels.Set{"app": "web"}

func amounts(list corev1.ResourceList) [2]int64 {
	out := [2]int64{-1, -1}
	if q, ok := list[corev1.ResourceCPU]; ok {
		out[0] = q.MilliValue()
	}
	if q, ok := list[corev1.ResourceMemory]; ok {
		out[1] = q.Value()
	}
	return out
}

func main() {
	// The recommender's default flags (pkg/recommender/config/config.go DefaultRecommenderConfig).
	model.InitializeAggregationsConfig(model.NewAggregationsConfig(
		model.DefaultMemoryAggregationInterval, model.DefaultMemoryAggregationIntervalCount,
		model.DefaultMemoryHistogramDecayHalfLife, model.DefaultCPUHistogramDecayHalfLife,
		model.DefaultOOMBumpUpRatio, model.DefaultOOMMinBumpUp))
	recommender := logic.CreatePodResourceRecommender(logic.RecommendationConfig{
		SafetyMarginFraction:       0.15,
		PodMinCPUMillicores:        25,
		PodMinMemoryMb:             250,
		TargetCPUPercentile:        0.9,
		LowerBoundCPUPercentile:    0.5,
		UpperBoundCPUPercentile:    0.95,
		ConfidenceIntervalCPU:      24 * time.Hour,
		TargetMemoryPercentile:     0.9,
		LowerBoundMemoryPercentile: 0.5,
		UpperBoundMemoryPercentile: 0.95,
		ConfidenceIntervalMemory:   24 * time.Hour,
	})
	format := logic.RecommendationFormat{HumanizeMemory: false, RoundCPUMillicores: 1, RoundMemoryBytes: 1}
	capping := routines.NewCappingRecommendationProcessor(corev1.ResourceList{})
	// routines/recommender_controller.go: aggregateContainerStateGCInterval = 1 h
	cluster := model.NewClusterState(time.Hour)
	ctx := context.Background()

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()

	debug := os.Getenv("VPA_ORACLE_DEBUG") != "" // also print the pods' memory windows
	var observed *vpa_types.VerticalPodAutoscaler
	var vpa *model.Vpa
	known := map[string]bool{}
	line := 0
	for in.Scan() {
		line++
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			fmt.Fprintf(os.Stderr, "vpa-oracle: line %d: %v\n", line, err)
			os.Exit(2)
		}
		if e.VPA != nil {
			mode := vpa_types.UpdateModeOff
			observed = &vpa_types.VerticalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"},
				Spec: vpa_types.VerticalPodAutoscalerSpec{
					TargetRef:      &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
					UpdatePolicy:   &vpa_types.PodUpdatePolicy{UpdateMode: &mode},
					ResourcePolicy: e.VPA.ResourcePolicy,
				},
			}
			if err := cluster.AddOrUpdateVpa(observed, labels.SelectorFromSet(podLabels)); err != nil {
				fmt.Fprintf(os.Stderr, "vpa-oracle: %v\n", err)
				os.Exit(2)
			}
			vpa = cluster.VPAs()[model.VpaID{Namespace: namespace, VpaName: "web"}]
			continue
		}
		if e.TS == nil || vpa == nil {
			fmt.Fprintf(os.Stderr, "vpa-oracle: line %d: expected the vpa line first, then events with a ts\n", line)
			os.Exit(2)
		}
		ts := time.Unix(*e.TS, 0).UTC()
		switch {
		case e.Pods != nil:
			// The feeder's LoadPods (AddOrUpdatePod, AddOrUpdateContainer) and DeleteRemovedPods.
			now := map[string]bool{}
			for _, p := range *e.Pods {
				now[p.Name] = true
				id := model.PodID{Namespace: namespace, PodName: p.Name}
				cluster.AddOrUpdatePod(id, podLabels, corev1.PodRunning)
				for _, c := range p.Containers {
					if err := cluster.AddOrUpdateContainer(model.ContainerID{PodID: id, ContainerName: c}, model.Resources{}); err != nil {
						fmt.Fprintf(os.Stderr, "vpa-oracle: %v\n", err)
						os.Exit(2)
					}
				}
			}
			for name := range known {
				if !now[name] {
					cluster.DeletePod(model.PodID{Namespace: namespace, PodName: name})
				}
			}
			known = now
		case e.Samples != nil:
			// The feeder's LoadRealTimeMetrics: metrics-server usage quantities, CPU as
			// MilliValue() (input/metrics/metrics_client.go), memory as Value(); the OOM observer's
			// RecordOOM with the container's memory request.
			for _, s := range e.Samples {
				id := model.ContainerID{PodID: model.PodID{Namespace: namespace, PodName: s.Pod}, ContainerName: s.Container}
				if s.CPU != nil {
					q := resource.NewScaledQuantity(int64(math.Round(*s.CPU*1e9)), resource.Nano)
					_ = cluster.AddSample(&model.ContainerUsageSampleWithKey{
						ContainerUsageSample: model.ContainerUsageSample{MeasureStart: ts, Usage: model.ResourceAmount(q.MilliValue()), Resource: model.ResourceCPU},
						Container:            id,
					})
				}
				if s.Memory != nil {
					q := resource.NewQuantity(*s.Memory, resource.BinarySI)
					if s.OOM {
						_ = cluster.RecordOOM(id, ts, model.ResourceAmount(q.Value()))
					} else {
						_ = cluster.AddSample(&model.ContainerUsageSampleWithKey{
							ContainerUsageSample: model.ContainerUsageSample{MeasureStart: ts, Usage: model.ResourceAmount(q.Value()), Resource: model.ResourceMemory},
							Container:            id,
						})
					}
				}
			}
		case e.Run:
			// routines/recommender.go RunOnce: UpdateVPAs (processVPAUpdate), then the GC.
			resources := recommender.GetRecommendedPodResources(routines.GetContainerNameToAggregateStateMap(vpa))
			list := logic.MapToListOfRecommendedContainerResources(resources, format)
			list = capping.Process(observed, list)
			recs := map[string]map[string][2]int64{}
			for _, c := range list.ContainerRecommendations {
				recs[c.ContainerName] = map[string][2]int64{
					"target":   amounts(c.Target),
					"lower":    amounts(c.LowerBound),
					"upper":    amounts(c.UpperBound),
					"uncapped": amounts(c.UncappedTarget),
				}
			}
			doc := map[string]any{"ts": *e.TS, "recs": recs}
			if debug {
				// Each live pod's memory window: [WindowEnd (s), max peak (bytes)].
				windows := map[string][2]int64{}
				for name := range known {
					for _, c := range []string{"app", "sidecar"} {
						if cs := cluster.GetContainer(model.ContainerID{PodID: model.PodID{Namespace: namespace, PodName: name}, ContainerName: c}); cs != nil && !cs.WindowEnd.IsZero() {
							windows[name+"/"+c] = [2]int64{cs.WindowEnd.Unix(), int64(cs.GetMaxMemoryPeak())}
						}
					}
				}
				doc["windows"] = windows
			}
			b, _ := json.Marshal(doc)
			out.Write(b)
			out.WriteByte('\n')
			cluster.RateLimitedGarbageCollectAggregateCollectionStates(ctx, ts, existing{})
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "vpa-oracle: %v\n", err)
		os.Exit(2)
	}
}
