// Command hpa-oracle runs the HPA controller's ReplicaCalculator.GetResourceReplicas of
// k8s.io/kubernetes (v1.36.3, the kube-apiserver's version) with its real resource-metrics client
// over a fake metrics clientset, one case a line: the reference that tests/oracle/test_hpa_oracle.py
// holds tandem's scaling.recommend.hpa to.
//
// Input, one JSON object a line (tests/oracle/hpa_cases.py writes them); times are whole seconds
// before now (the calculator compares pod start times with the wall clock):
//
//	{"resource": "cpu", "container": "", "target": 70, "current": 5, "tolerance": [0.1, 0.1],
//	 "cpuInit": 300, "readinessDelay": 30, "window": 15,
//	 "pods": [{"name", "phase", "ready", "startAge", "readyAge", "deleting",
//	           "requests": {"app": 500}, "usage": {"app": 300} or null, "metricAge"}]}
//
// requests and usage in tandem's units (CPU millicores, memory bytes; a container absent from
// requests has no request, a usage of -1 is a container that reports no value for the resource).
// Output, a line per case: {"replicas", "utilization", "raw"} or {"error": "..."}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/controller/podautoscaler"
	metricsclient "k8s.io/kubernetes/pkg/controller/podautoscaler/metrics"
	metricsapi "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

type podCase struct {
	Name      string           `json:"name"`
	Phase     string           `json:"phase"`
	Ready     bool             `json:"ready"`
	StartAge  int64            `json:"startAge"`
	ReadyAge  int64            `json:"readyAge"`
	Deleting  bool             `json:"deleting"`
	Requests  map[string]int64 `json:"requests"`
	Usage     map[string]int64 `json:"usage"`
	MetricAge int64            `json:"metricAge"`
	Order     []string         `json:"containers"`
}

type hpaCase struct {
	Resource       string     `json:"resource"`
	Container      string     `json:"container"`
	Target         int32      `json:"target"`
	Current        int32      `json:"current"`
	Tolerance      [2]float64 `json:"tolerance"`
	CPUInit        int64      `json:"cpuInit"`
	ReadinessDelay int64      `json:"readinessDelay"`
	Window         int64      `json:"window"`
	Pods           []podCase  `json:"pods"`
	Unlisted       []podCase  `json:"unlisted"` // metrics of pods the lister does not return
}

// tolerances builds podautoscaler.Tolerances{scaleDown, scaleUp}: its fields are unexported and the
// package has no constructor (the controller fills them from its flags), so through a struct of the
// same layout.
func tolerances(down, up float64) podautoscaler.Tolerances {
	v := struct{ down, up float64 }{down, up}
	return *(*podautoscaler.Tolerances)(unsafe.Pointer(&v))
}

// quantity is a value in tandem's unit of the resource (CPU millicores, memory bytes) as the
// quantity metrics-server and the pod spec carry.
func quantity(res string, v int64) resource.Quantity {
	if res == "cpu" {
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return *resource.NewQuantity(v, resource.BinarySI)
}

func run(c hpaCase, now time.Time) map[string]any {
	name := corev1.ResourceName(c.Resource)
	selector := labels.SelectorFromSet(labels.Set{"app": "web"})
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	client := &metricsfake.Clientset{}
	list := &metricsapi.PodMetricsList{}
	for _, p := range c.Unlisted {
		c.Pods = append(c.Pods, p)
	}
	for i, p := range c.Pods {
		listed := i < len(c.Pods)-len(c.Unlisted)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "shop", Labels: map[string]string{"app": "web"}},
			Status: corev1.PodStatus{
				Phase:     corev1.PodPhase(p.Phase),
				StartTime: &metav1.Time{Time: now.Add(-time.Duration(p.StartAge) * time.Second)},
				Conditions: []corev1.PodCondition{{
					Type:               corev1.PodReady,
					Status:             map[bool]corev1.ConditionStatus{true: corev1.ConditionTrue, false: corev1.ConditionFalse}[p.Ready],
					LastTransitionTime: metav1.Time{Time: now.Add(-time.Duration(p.ReadyAge) * time.Second)},
				}},
			},
		}
		if p.Deleting {
			pod.DeletionTimestamp = &metav1.Time{Time: now}
		}
		for _, cn := range p.Order {
			ctr := corev1.Container{Name: cn, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
			if r, ok := p.Requests[cn]; ok {
				ctr.Resources.Requests[name] = quantity(c.Resource, r)
			}
			pod.Spec.Containers = append(pod.Spec.Containers, ctr)
		}
		if listed {
			if err := indexer.Add(pod); err != nil {
				panic(err)
			}
		}
		if p.Usage != nil {
			m := metricsapi.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "shop", Labels: map[string]string{"app": "web"}},
				Timestamp:  metav1.Time{Time: now.Add(-time.Duration(p.MetricAge) * time.Second)},
				Window:     metav1.Duration{Duration: time.Duration(c.Window) * time.Second},
			}
			names := make([]string, 0, len(p.Usage))
			for cn := range p.Usage {
				names = append(names, cn)
			}
			sort.Strings(names)
			for _, cn := range names {
				v := p.Usage[cn]
				usage := corev1.ResourceList{}
				if v >= 0 { // -1: the container reports no value for the resource
					usage[name] = quantity(c.Resource, v)
				}
				m.Containers = append(m.Containers, metricsapi.ContainerMetrics{Name: cn, Usage: usage})
			}
			list.Items = append(list.Items, m)
		}
	}
	client.AddReactor("list", "pods", func(action core.Action) (bool, runtime.Object, error) {
		return true, list, nil
	})
	metrics := metricsclient.NewRESTMetricsClient(client.MetricsV1beta1(), nil, nil)
	calc := podautoscaler.NewReplicaCalculator(metrics, corelisters.NewPodLister(indexer),
		time.Duration(c.CPUInit)*time.Second, time.Duration(c.ReadinessDelay)*time.Second)
	replicas, utilization, raw, _, err := calc.GetResourceReplicas(context.Background(), c.Current, c.Target, name,
		tolerances(c.Tolerance[0], c.Tolerance[1]), "shop", selector, c.Container)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	return map[string]any{"replicas": replicas, "utilization": utilization, "raw": raw}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	line := 0
	for in.Scan() {
		line++
		var c hpaCase
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintf(os.Stderr, "hpa-oracle: line %d: %v\n", line, err)
			os.Exit(2)
		}
		b, _ := json.Marshal(run(c, time.Now()))
		out.Write(b)
		out.WriteByte('\n')
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "hpa-oracle: %v\n", err)
		os.Exit(2)
	}
}
